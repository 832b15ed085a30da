package dns_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

// Answers of the provider that are not what they seem.
const (
	nginx404  = `<html><head><title>404 Not Found</title></head><body><center><h1>404 Not Found</h1></center><hr><center>nginx</center></body></html>`
	route7003 = `{"success":false,"errors":[{"code":7003,"message":"Could not route to /client/v4/zones/dns_records/x, perhaps your object identifier is invalid?"}],"messages":[],"result":null}`
	gone81044 = `{"success":false,"errors":[{"code":81044,"message":"Record does not exist."}],"messages":[],"result":null}`
	gone1032  = `{"success":false,"errors":[{"code":1032,"message":"Invalid DNS record identifier"}],"messages":[],"result":null}`
)

func createActive(t *testing.T, a *apptest.App, token string) rec {
	t.Helper()
	r := a.Post("/api/me/dns", token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	return got
}

// TestOnlyTheProvidersNotFoundCodeMeansGone: a DELETE answered 404 is "already deleted" only
// when the provider says so with its code (81044, or 1032 for an unknown id). A proxy's HTML 404
// or Cloudflare's routing error (7003) says nothing about the record: the revocation stays
// Revoking, the record stays at the provider, and the finisher tries again, which deletes it. The
// same holds when a user is deleted.
func TestOnlyTheProvidersNotFoundCodeMeansGone(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	for _, tc := range []struct {
		name, raw, ct string
	}{{"nginx html", nginx404, "text/html"}, {"routing error 7003", route7003, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			got := createActive(t, a, u.Token)
			fake.Fail(cloudflaretest.Fault{Method: "DELETE", Status: 404, Raw: tc.raw, ContentType: tc.ct})
			r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			r.Decode(t, &got)
			assert.Equal(t, "Revoking", got.Status)
			assert.Contains(t, got.ErrorMessage, "404")
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
			require.Contains(t, fake.Records(), got.ProviderRecordID, "the record is still at the provider")

			assert.Equal(t, "Revoked", retryNow(t, a, got.ID))
			assert.NotContains(t, fake.Records(), got.ProviderRecordID, "the finisher's retry deleted it")
		})
	}

	// The provider's own "not found" codes: gone, Revoked at once.
	for _, tc := range []struct {
		name, raw string
		status    int
	}{{"81044", gone81044, 404}, {"1032", gone1032, 400}} {
		t.Run(tc.name, func(t *testing.T) {
			got := createActive(t, a, u.Token)
			fake.Fail(cloudflaretest.Fault{Method: "DELETE", Status: tc.status, Raw: tc.raw})
			r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.Contains(t, string(r.Raw), `"status":"Revoked"`)
		})
	}

	// A deleted user's record: the same.
	v := a.Register(t)
	got := createActive(t, a, v.Token)
	fake.Fail(cloudflaretest.Fault{Method: "DELETE", Status: 404, Raw: route7003})
	admin := a.AdminToken(t)
	require.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", v.ID), Token: admin}).Status)
	a.Settle(5 * time.Second)
	assert.Equal(t, "Revoking", statusOf(t, a, got.ID))
	require.Contains(t, fake.Records(), got.ProviderRecordID, "the record is still at the provider")
	assert.Equal(t, "Revoked", retryNow(t, a, got.ID))
	assert.NotContains(t, fake.Records(), got.ProviderRecordID)
}

// TestCreateAnsweredWithoutSuccessIsTransient: a create the provider carried out but answered
// with a 2xx that is no proper envelope (no success: true) is not a final failure: the record stays
// Pending (502 with Retry-After) and the finisher's lookup adopts what the provider made: one
// record, Active with its id. A create answered with a 4xx after it may have reached the provider
// ends Failed, and its leftover is deleted in the background.
func TestCreateAnsweredWithoutSuccessIsTransient(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	for _, raw := range []string{`{"errors":[],"messages":[]}`, `{"success":false,"errors":[],"messages":[],"result":null}`, `OK`} {
		l := label()
		fake.Fail(cloudflaretest.Fault{Method: "POST", Raw: raw, Carried: true})
		r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var got rec
		r.Decode(t, &got)
		assert.Equal(t, "Pending", got.Status, "%s: not Failed while the provider may hold it", raw)
		assert.Contains(t, got.ErrorMessage, "malformed answer")
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		require.Len(t, at(fake, l), 1, "the provider made it")

		require.Equal(t, "Active", retryNow(t, a, got.ID))
		var pid string
		require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&pid))
		assert.Equal(t, at(fake, l)[0].ID, pid, "adopted")
		require.Len(t, at(fake, l), 1, "never created twice")
	}

	// Failed after the create was sent: the leftover check is queued and deletes our record.
	l := label()
	fake.Fail(cloudflaretest.Fault{Method: "POST", Status: 400, Carried: true,
		Raw: `{"success":false,"errors":[{"code":1004,"message":"DNS Validation Error"}],"messages":[],"result":null}`})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	require.Equal(t, "Failed", got.Status)
	require.Len(t, at(fake, l), 1)
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM dns_leftovers WHERE record_id = ?", got.ID).Scan(&n))
	assert.Equal(t, 1, n, "a cleanup is queued")
	a.Settle(5 * time.Second)
	assert.Empty(t, at(fake, l), "the Failed record's leftover is deleted")
}

// TestCreateSuccessWithoutAnIdIsMalformed: a create answered success: true without a record id
// (result null) is never Active with an empty providerRecordId: 502, Pending, and the finisher's
// lookup settles it (here nothing was stored: it creates the record, once).
func TestCreateSuccessWithoutAnIdIsMalformed(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	for _, raw := range []string{`{"success":true,"errors":[],"messages":[],"result":null}`,
		`{"success":true,"errors":[],"messages":[],"result":{"type":"A","content":"203.0.113.10"}}`} {
		l := label()
		fake.Fail(cloudflaretest.Fault{Method: "POST", Raw: raw})
		r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var got rec
		r.Decode(t, &got)
		assert.Equal(t, "Pending", got.Status)
		assert.Empty(t, got.ProviderRecordID)
		assert.Contains(t, got.ErrorMessage, "without an id")

		require.Equal(t, "Active", retryNow(t, a, got.ID))
		var pid string
		require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&pid))
		require.Len(t, at(fake, l), 1)
		assert.Equal(t, at(fake, l)[0].ID, pid)
	}
}

// TestRecordOfAnotherTypeHoldsTheName: a name at which the provider holds a record of any type not
// ours (a CNAME, which Cloudflare answers with 81053; an AAAA, TXT or MX, beside which it would
// accept our A record) is a conflict: 409, nothing stored, nothing created, the other record
// untouched. Our own A record at the name is still adopted.
func TestRecordOfAnotherTypeHoldsTheName(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	for _, typ := range []string{"CNAME", "AAAA", "TXT", "MX"} {
		l := label()
		content := map[string]string{"CNAME": "elsewhere.example.net", "AAAA": "2001:db8::1", "TXT": "v=spf1 -all", "MX": "mail.example.net"}[typ]
		theirs := fake.PutRecord(cloudflaretest.Record{Type: typ, Name: l + ".cell", Content: content, TTL: 1})
		r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
		require.Equal(t, http.StatusConflict, r.Status, "%s: %s", typ, r.Raw)
		assert.Contains(t, r.Env.Message, l+".cell.example.com")
		require.Len(t, at(fake, l), 1, "%s: nothing created beside it", typ)
		assert.Equal(t, theirs, at(fake, l)[0].ID)
	}
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM dns_records WHERE user_id = ?", u.ID).Scan(&n))
	assert.Zero(t, n, "nothing stored, no Failed rows")
	assert.Zero(t, fake.Creates())

	// Our own A record at a name (a create whose answer was lost) is adopted.
	got := createActive(t, a, u.Token)
	_, err := a.DB.Exec("UPDATE dns_records SET status = 'Pending', provider_record_id = '' WHERE id = ?", got.ID)
	require.NoError(t, err)
	assert.Equal(t, "Active", retryNow(t, a, got.ID))
	assert.EqualValues(t, 1, fake.Creates())
}
