package dns_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
)

// withoutProviderIDIndex drops the partial unique index on dns_records.provider_record_id for the
// rest of the test, as a database is left where its migration (20261125000200) found duplicates
// and skipped it. The index is recreated when the test ends, once rows (the test's duplicates) are
// deleted. The package's tests share one database but never run in parallel.
func withoutProviderIDIndex(t *testing.T, a *apptest.App, rows ...int64) {
	t.Helper()
	_, err := a.DB.Exec("DROP INDEX dns_records_provider_id_uq")
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, id := range rows {
			_, err := a.DB.Exec("DELETE FROM dns_leftovers WHERE record_id = ?", id)
			assert.NoError(t, err)
			_, err = a.DB.Exec("DELETE FROM dns_records WHERE id = ?", id)
			assert.NoError(t, err)
		}
		_, err := a.DB.Exec(`CREATE UNIQUE INDEX IF NOT EXISTS dns_records_provider_id_uq ON dns_records (provider_record_id)
			WHERE provider_record_id <> '' AND status <> 'Revoked'`)
		assert.NoError(t, err, "the index is back for the next tests")
	})
}

// TestRevokingARecordWhoseStoredIdAnotherRecordHolds: where the unique index was skipped, two live
// records may hold one provider id. Revoking one of them never deletes that id at the provider
// (the other user's record would vanish from the zone): it is left there (logged), the name is
// looked up instead and only the revoked row's own record (its marker, an id no other live row
// holds) is deleted. The revoked record ends Revoked; the other stays Active and at the provider.
func TestRevokingARecordWhoseStoredIdAnotherRecordHolds(t *testing.T) {
	logs := &syncBuffer{}
	capture := apptest.WithFx(fx.Decorate(func(*slog.Logger) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}))
	a, fake := setup(t, nil, capture)
	alice, bob := a.Register(t), a.Register(t)
	first := createActive(t, a, alice.Token)
	mine := createActive(t, a, bob.Token)
	require.NotEqual(t, first.ProviderRecordID, mine.ProviderRecordID)
	own := mine.ProviderRecordID

	// An old duplicate: bob's row holds alice's provider id.
	withoutProviderIDIndex(t, a, first.ID, mine.ID)
	_, err := a.DB.Exec("UPDATE dns_records SET provider_record_id = ? WHERE id = ?", first.ProviderRecordID, mine.ID)
	require.NoError(t, err)

	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", mine.ID), Token: bob.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Revoked", got.Status)
	assert.Empty(t, got.ErrorMessage)
	untouched(t, a, fake, first)
	_, held := fake.Records()[own]
	assert.False(t, held, "bob's own record (its marker) is deleted at the provider")
	assert.Empty(t, at(fake, mine.Label), "nothing of bob's left at his name")
	logged := false
	for _, line := range strings.Split(logs.String(), "\n") {
		logged = logged || strings.Contains(line, "held by another live record; left at the provider") &&
			strings.Contains(line, "providerRecordId="+first.ProviderRecordID)
	}
	assert.True(t, logged, "the shared id left at the provider is logged")

	// Alice's record is still hers to revoke: the id is no longer shared with a live row.
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", first.ID), Token: alice.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	_, held = fake.Records()[first.ProviderRecordID]
	assert.False(t, held, "alice's revocation deletes her record")
}
