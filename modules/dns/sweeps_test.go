package dns_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

// TestSweepThatKeepsFailingIsGivenUp: a leftover sweep whose lookups keep failing is retried
// while it is younger than dns.SweepGiveUpAfter; once older (and past Finisher:MaxAttempts) its
// next failure ends it GaveUp with the provider's error, logged at WARN once and audited, and the
// finisher never calls the provider for it again.
func TestSweepThatKeepsFailingIsGivenUp(t *testing.T) {
	logs := &syncBuffer{}
	capture := apptest.WithFx(fx.Decorate(func(*slog.Logger) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}))
	a, fake := setup(t, map[string]any{"Finisher:MaxAttempts": 1}, capture)
	u := a.Register(t)
	l := label()
	dead := failedWhileHeld(t, a, fake, u.Token, l)
	require.Len(t, at(fake, l), 1, "the provider holds the Failed row's record")
	type sweep struct {
		Status    string `bun:"status"`
		Attempts  int    `bun:"attempts"`
		LastError string `bun:"last_error"`
	}
	load := func() sweep {
		t.Helper()
		var s sweep
		require.NoError(t, a.DB.NewSelect().Table("dns_leftovers").Column("status", "attempts", "last_error").
			Where("record_id = ?", dead.ID).Scan(context.Background(), &s))
		return s
	}
	due := func(extra string) {
		t.Helper()
		_, err := a.DB.Exec("UPDATE dns_leftovers SET next_attempt_at = now()"+extra+" WHERE record_id = ?", dead.ID)
		require.NoError(t, err)
	}

	// A young sweep that fails is retried, whatever Finisher:MaxAttempts says.
	fake.Fail(cloudflaretest.Fault{Status: http.StatusForbidden, Method: "GET"})
	due("")
	a.Settle(5 * time.Second)
	s := load()
	assert.Equal(t, "Sweeping", s.Status, "a young sweep is not given up")
	assert.Equal(t, 1, s.Attempts)
	assert.Contains(t, s.LastError, "403")

	// Past dns.SweepGiveUpAfter its next failure gives it up.
	due(", created_at = now() - interval '8 days'")
	fake.Fail(cloudflaretest.Fault{Status: http.StatusForbidden, Method: "GET"})
	a.Settle(5 * time.Second)
	s = load()
	assert.Equal(t, "GaveUp", s.Status)
	assert.Equal(t, 2, s.Attempts)
	assert.Contains(t, s.LastError, "403", "the last error is kept")
	assert.Equal(t, 1, strings.Count(logs.String(), "dns leftover sweep given up"), "logged once: %s", logs.String())
	assert.Contains(t, logs.String(), "level=WARN msg=\"dns leftover sweep given up")
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'dns.leftover.given_up' AND target_id = ?", fmt.Sprint(dead.ID)).Scan(&n))
	assert.Equal(t, 1, n, "audited")

	// Never tried again.
	calls := fake.Calls()
	due("")
	a.Settle(5 * time.Second)
	assert.Equal(t, calls, fake.Calls(), "no provider call for a given-up sweep")
	assert.Equal(t, "GaveUp", load().Status)
	assert.Len(t, at(fake, l), 1, "nothing deleted")
	assert.Equal(t, 1, strings.Count(logs.String(), "dns leftover sweep given up"))
}

// TestSweepThatFindsNothingEndsSwept: a sweep whose lookup finds no record of ours (another
// party's record at the name is not) ends Swept and deletes nothing.
func TestSweepThatFindsNothingEndsSwept(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	l := label()
	var recordID int64
	require.NoError(t, a.DB.QueryRow(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, attempts)
		VALUES (?, ?, ?, ?, '203.0.113.10', 1, 'Failed', 1) RETURNING id`, u.ID, l, l+".cell", l+".cell.example.com").Scan(&recordID))
	_, err := a.DB.Exec("INSERT INTO dns_leftovers (record_id) VALUES (?)", recordID)
	require.NoError(t, err)
	theirs := fake.Put(l+".cell", "203.0.113.10") // same name and content, no marker of ours
	a.Settle(5 * time.Second)
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_leftovers WHERE record_id = ?", recordID).Scan(&status))
	assert.Equal(t, "Swept", status)
	left := at(fake, l)
	require.Len(t, left, 1)
	assert.Equal(t, theirs, left[0].ID, "another party's record is untouched")
}

// TestDoneSweepsArePruned: Swept and GaveUp sweeps that ended more than dns.SweepRetention ago
// are deleted by the finisher; recent ones, and a sweep still in flight however old, are kept.
func TestDoneSweepsArePruned(t *testing.T) {
	a, _ := setup(t, nil)
	u := a.Register(t)
	var recordID int64
	l := label()
	require.NoError(t, a.DB.QueryRow(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, attempts)
		VALUES (?, ?, ?, ?, '203.0.113.10', 1, 'Failed', 1) RETURNING id`, u.ID, l, l+".cell", l+".cell.example.com").Scan(&recordID))
	insert := func(status, ended string) int64 {
		t.Helper()
		var id int64
		require.NoError(t, a.DB.QueryRow(`INSERT INTO dns_leftovers (record_id, status, created_at, updated_at, next_attempt_at)
			VALUES (?, ?, now() - interval '60 days', now() - interval '`+ended+`', now() + interval '1 day') RETURNING id`, recordID, status).Scan(&id))
		return id
	}
	oldSwept, oldGaveUp := insert("Swept", "31 days"), insert("GaveUp", "40 days")
	kept := []int64{insert("Swept", "29 days"), insert("GaveUp", "1 day"), insert("Sweeping", "59 days")}

	a.Settle(5 * time.Second)
	var left []int64
	rows, err := a.DB.Query("SELECT id FROM dns_leftovers WHERE record_id = ? ORDER BY id", recordID)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		left = append(left, id)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, kept, left, "pruned %d and %d only", oldSwept, oldGaveUp)
}
