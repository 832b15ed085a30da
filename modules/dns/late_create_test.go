package dns_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestRevokingWhileTheCreateIsStillAtTheProviderLeavesNoRecord: a create that timed out on our
// side (502, Pending) may still be carried out by a slow provider. Revoked meanwhile, the record
// is looked up, found absent and Revoked; the provider then makes it, with our comment. That
// record stayed in the zone, serving the revoked address, with nothing left to delete it. The
// revocation of a record whose create's outcome was never recorded queues a later cleanup, which
// deletes it.
func TestRevokingWhileTheCreateIsStillAtTheProviderLeavesNoRecord(t *testing.T) {
	a, fake := setup(t, nil) // Dns:TimeoutSeconds 1
	u := a.Register(t)
	var landed sync.WaitGroup
	landed.Add(1)
	fake.SetBeforeCreate(func(string) { time.Sleep(1800 * time.Millisecond) }) // carried out after our timeout
	fake.SetAfterCreate(func(string) { landed.Done() })
	l := label()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	require.Equal(t, "Pending", got.Status)
	require.Empty(t, at(fake, l), "not made yet")

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &got)
	require.Equal(t, "Revoked", got.Status)

	landed.Wait()
	fake.SetBeforeCreate(nil)
	fake.SetAfterCreate(nil)
	require.Len(t, at(fake, l), 1, "the provider made it after all")

	// The cleanup waits a while (a late create); run it now.
	_, err := a.DB.Exec("UPDATE dns_leftovers SET next_attempt_at = now() WHERE record_id = ?", got.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	assert.Empty(t, at(fake, l), "the revoked record's late leftover is deleted")
}
