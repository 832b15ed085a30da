package dns_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

// TestCreateLeavesAnEditedLeftoverAlone: a record carrying a dead (Failed) row's marker but
// another content than that row's (someone edited it at the provider) is not the row's leftover:
// a create of its label does not delete it (the name is held by a record not ours: 409, nothing
// stored), as the background sweep would not either. With the row's own content it is our
// leftover, and the create deletes it and proceeds.
func TestCreateLeavesAnEditedLeftoverAlone(t *testing.T) {
	a, fake := setup(t, map[string]any{"Finisher:MaxAttempts": 1})
	u, v := a.Register(t), a.Register(t)
	l := label()
	dead := failedWhileHeld(t, a, fake, u.Token, l)
	held := at(fake, l)
	require.Len(t, held, 1)
	require.Contains(t, held[0].Comment, fmt.Sprintf("record:%d", dead.ID))
	require.True(t, fake.SetContent(held[0].ID, "192.0.2.99"))

	r := a.Post("/api/me/dns", v.Token, map[string]any{"label": l, "content": "198.51.100.50"})
	require.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	left := at(fake, l)
	require.Len(t, left, 1, "the edited record is left alone")
	assert.Equal(t, held[0].ID, left[0].ID)
	assert.Equal(t, "192.0.2.99", left[0].Content)
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM dns_records WHERE user_id = ? AND label = ?", v.ID, l).Scan(&n))
	assert.Zero(t, n, "nothing stored for the 409")

	// The same record with the dead row's content is ours: deleted, and v's record is created.
	require.True(t, fake.SetContent(held[0].ID, dead.Content))
	r = a.Post("/api/me/dns", v.Token, map[string]any{"label": l, "content": "198.51.100.50"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	left = at(fake, l)
	require.Len(t, left, 1)
	assert.Equal(t, got.ProviderRecordID, left[0].ID, "our leftover replaced by v's record")
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'dns.leftover.deleted' AND target_id = ?", fmt.Sprint(dead.ID)).Scan(&n))
	assert.Equal(t, 1, n, "audited once")
}

// TestMarkerBeyondOurIdsIsNotOurs: a record at the name whose comment looks like our marker but
// names ids no row can have (beyond 64 bits) is somebody else's: the create answers 409 and
// stores nothing. Such ids went into the row lookup as they were, and every attempt of the
// create failed on the database's error instead.
func TestMarkerBeyondOurIdsIsNotOurs(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	l := label()
	fake.PutRecord(cloudflaretest.Record{Name: l + ".cell.example.com", Content: "203.0.113.10", TTL: 1,
		Comment: "provisioner user:99999999999999999999 record:99999999999999999999"})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	require.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	require.Len(t, at(fake, l), 1, "left alone")
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM dns_records WHERE user_id = ? AND label = ?", u.ID, l).Scan(&n))
	assert.Zero(t, n, "nothing stored for the 409")
}
