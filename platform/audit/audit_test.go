package audit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"provisioner/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func recorder(t *testing.T) (*audit.Recorder, *bun.DB, func(id int64) audit.Event) {
	t.Helper()
	ctx := context.Background()
	bdb, err := db.Open(ctx, testutil.PackageDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = bdb.Close() })
	m, err := db.NewMigrator(bdb, []db.Migrations{{Module: "platform", FS: migrations.FS}})
	require.NoError(t, err)
	_, err = m.Up(ctx)
	require.NoError(t, err)
	load := func(id int64) audit.Event {
		var e audit.Event
		require.NoError(t, bdb.NewSelect().Model(&e).Where("id = ?", id).Scan(ctx))
		return e
	}
	return audit.NewRecorder(bdb, nil, audit.SystemNamespaces{"dns"}), bdb, load
}

// Details are whatever users typed: a quoted email local part with the six characters \u0000,
// a real NUL, quotes and backslashes. bun's AppendJSON turned the escaped backslash before
// "u0000" into a \u0000 escape that jsonb refuses, so recording the event failed (a 500 for the
// request it described).
func TestDetailsRoundTrip(t *testing.T) {
	r, bdb, load := recorder(t)
	ctx := context.Background()
	cases := map[string]struct {
		in, want any
	}{
		"literal backslash-u0000":    {`"a\u0000"@example.com`, `"a\u0000"@example.com`},
		"backslashes before u0000":   {`\\u0000 \\\u0000`, `\\u0000 \\\u0000`},
		"quotes and backslashes":     {`it's "quoted" \ \\ \n '' ''`, `it's "quoted" \ \\ \n '' ''`},
		"sql-looking":                {`'); DROP TABLE audit_events; --`, `'); DROP TABLE audit_events; --`},
		"real NUL is replaced":       {"a\x00b", "a\uFFFDb"},
		"unicode":                    {"Grüße ✓ \u2028", "Grüße ✓ \u2028"},
		"nested":                     {map[string]any{"from": `x\u0000`, "to": []any{"y\x00", `\`}}, map[string]any{"from": `x\u0000`, "to": []any{"y\uFFFD", `\`}}},
		"a question mark (bun args)": {"what? ?0 ?", "what? ?0 ?"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stored, err := r.StoredNote(ctx, bdb, audit.Event{Action: "test.details", TargetType: "test", TargetID: "x\x00y",
				Details: map[string]any{"value": tc.in, `key with \u0000 and "quotes"`: 1, "nul\x00key": true}})
			require.NoError(t, err)
			require.NotZero(t, stored.ID)
			got := load(stored.ID)
			assert.Equal(t, tc.want, got.Details["value"])
			assert.EqualValues(t, 1, got.Details[`key with \u0000 and "quotes"`])
			assert.Equal(t, true, got.Details["nul\uFFFDkey"])
			assert.Equal(t, "x\uFFFDy", got.TargetID)
		})
	}
}

func TestNilDetailsStoreAnEmptyObject(t *testing.T) {
	r, bdb, load := recorder(t)
	ctx := context.Background()
	stored, err := r.StoredNote(ctx, bdb, audit.Event{Action: "test.empty", TargetType: "test"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, load(stored.ID).Details)
}

func TestAmendKeepsDetailsAsStored(t *testing.T) {
	r, bdb, load := recorder(t)
	ctx := context.Background()
	e, err := r.StoredNote(ctx, bdb, audit.Event{Action: "test.note", TargetType: "test", Details: map[string]any{"a": 1}})
	require.NoError(t, err)
	e.Action = "test.note\x00amended"
	e.Details = map[string]any{"note": `"x\u0000"@example.com`, "nul": "a\x00b"}
	require.NoError(t, audit.Amend(ctx, bdb, &e))
	got := load(e.ID)
	assert.Equal(t, "test.note\uFFFDamended", got.Action)
	assert.Equal(t, map[string]any{"note": `"x\u0000"@example.com`, "nul": "a\uFFFDb"}, got.Details)
	assert.Equal(t, got.Details, e.Details)
}

// The service's own events live in SystemNamespaces and an Admin's notes outside them: the
// Recorder refuses to store either on the wrong side, so a module that records a namespace it
// did not reserve fails at once (its events could otherwise be imitated by a note), and a note can
// never be stored as a service event. Nothing is stored by a refusal.
func TestRecorderKeepsServiceEventsAndNotesApart(t *testing.T) {
	r, bdb, _ := recorder(t)
	ctx := context.Background()
	count := func() (n int) {
		require.NoError(t, bdb.NewSelect().Table("audit_events").ColumnExpr("count(*)").Scan(ctx, &n))
		return n
	}
	before := count()

	_, err := r.Stored(ctx, bdb, audit.Event{Action: "notes.created", TargetType: "note"})
	require.Error(t, err, "a service event outside SystemNamespaces")
	assert.Contains(t, err.Error(), "audit.SystemNamespaces")
	require.Error(t, r.Record(ctx, audit.Event{Action: "Notes.Created", TargetType: "note"}), "Record goes the same way")
	_, err = r.StoredNote(ctx, bdb, audit.Event{Action: "DNS.created", TargetType: "dnsRecord"})
	require.Error(t, err, "a note in a service namespace, in any case")
	assert.Equal(t, before, count(), "nothing stored")

	_, err = r.Stored(ctx, bdb, audit.Event{Action: "dns.created", TargetType: "dnsRecord"})
	require.NoError(t, err)
	_, err = r.StoredNote(ctx, bdb, audit.Event{Action: "note.manual", TargetType: "note"})
	require.NoError(t, err)
	assert.Equal(t, before+2, count())
}
