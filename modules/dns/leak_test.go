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
	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

// TestProviderErrorEchoingTheTokenNeverShowsIt: a provider whose error message repeats the
// request's Authorization header (our API token) gets neither into the 502's answer, the stored
// record (error_message, last_error), the user's and the administrators' lists, the audit trail
// nor the log; the provider's code and the rest of its message are kept. That holds for a final
// failure (400: Failed) and a transient one (503: Pending, retried).
func TestProviderErrorEchoingTheTokenNeverShowsIt(t *testing.T) {
	logs := &syncBuffer{}
	capture := apptest.WithFx(fx.Decorate(func(*slog.Logger) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	a, fake := setup(t, nil, capture)
	u := a.Register(t)
	admin := a.AdminToken(t)
	leaks := func(where, s string) {
		t.Helper()
		assert.NotContains(t, s, token, where)
		assert.NotContains(t, s, "Bearer cf-", where)
	}

	fake.Fail(cloudflaretest.Fault{Echo: true, Method: "POST"})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var failed rec
	r.Decode(t, &failed)
	require.Equal(t, "Failed", failed.Status)
	assert.Contains(t, failed.ErrorMessage, "[9005] Content for A record is invalid.", "the provider's code and words are kept")
	assert.Contains(t, failed.ErrorMessage, "[redacted]")
	leaks("answer", string(r.Raw))

	echo := cloudflaretest.Fault{Echo: true, Status: http.StatusServiceUnavailable, Method: "POST"}
	fake.Fail(echo, echo, echo)
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var pending rec
	r.Decode(t, &pending)
	require.Equal(t, "Pending", pending.Status)
	assert.Contains(t, pending.ErrorMessage, "[9005]")
	leaks("answer of a transient failure", string(r.Raw))

	for _, id := range []int64{failed.ID, pending.ID} {
		var stored, last string
		require.NoError(t, a.DB.QueryRow("SELECT error_message, last_error FROM dns_records WHERE id = ?", id).Scan(&stored, &last))
		leaks("stored", stored+" "+last)
		leaks("admin record", string(a.Get(fmt.Sprintf("/api/dns/records/%d", id), admin).Raw))
	}
	leaks("my list", string(a.Get("/api/me/dns", u.Token).Raw))
	for _, status := range []string{"Failed", "Pending"} {
		r = a.Get("/api/dns/records?status="+status, admin)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Contains(t, string(r.Raw), "[9005]")
		leaks("admin list", string(r.Raw))
	}
	var details []string
	rows, err := a.DB.Query("SELECT details::text FROM audit_events WHERE user_id = ?", u.ID)
	require.NoError(t, err)
	for rows.Next() {
		var d string
		require.NoError(t, rows.Scan(&d))
		details = append(details, d)
	}
	require.NoError(t, rows.Close())
	leaks("audit", strings.Join(details, " "))
	leaks("log", logs.String())
}

// TestProviderErrorEchoingAPieceOfTheTokenNeverShowsIt: a provider (or a proxy) that echoes our
// token cut short (17 of its 19 characters) gets that piece neither into the stored record nor
// the dns.failed audit event: every piece of 16 characters or more is redacted.
func TestProviderErrorEchoingAPieceOfTheTokenNeverShowsIt(t *testing.T) {
	const short = "cfTok0123456789abcd" // 19 characters: no token-like 24+ run, no keyword
	fake := cloudflaretest.New("zone123", short, "example.com")
	t.Cleanup(fake.Close)
	a := apptest.Start(t, apptest.With(map[string]any{"Dns:BaseUrl": fake.URL, "Dns:ZoneId": "zone123", "Dns:ApiToken": short,
		"Dns:ZoneName": "example.com", "Dns:DefaultContent": "203.0.113.10", "Dns:TimeoutSeconds": 1}))
	u := a.Register(t)
	fake.Fail(cloudflaretest.Fault{Method: "POST", Status: 400,
		Raw: `{"success":false,"errors":[{"code":9005,"message":"Content for A record is invalid (sent by ` + short[:17] + `)"}],"messages":[],"result":null}`})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var failed rec
	r.Decode(t, &failed)
	require.Equal(t, "Failed", failed.Status)
	assert.Contains(t, failed.ErrorMessage, "[9005] Content for A record is invalid (sent by [redacted])")
	var stored, audit string
	require.NoError(t, a.DB.QueryRow("SELECT error_message FROM dns_records WHERE id = ?", failed.ID).Scan(&stored))
	require.NoError(t, a.DB.QueryRow("SELECT details::text FROM audit_events WHERE action = 'dns.failed' AND target_id = ?", fmt.Sprint(failed.ID)).Scan(&audit))
	for where, s := range map[string]string{"answer": string(r.Raw), "stored": stored, "audit": audit} {
		assert.NotContains(t, s, short[:16], where)
		assert.NotContains(t, s, short[1:17], where)
	}
}
