package databases

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPackedItemsUnpackAsPacked: a packed list unpacks to items equal to those packed (as Go
// values and as JSON), whatever they hold: known and unknown engines and statuses, a user that
// is not the database's name, times with and without nanoseconds, before 1970 and far ahead,
// absent ones, negative and large integers, empty and non-ASCII text.
func TestPackedItemsUnpackAsPacked(t *testing.T) {
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		v = v.UTC()
		return &v
	}
	for name, items := range map[string][]Item{
		"none": {},
		"one active": {{DatabaseInstanceID: 42, Name: "seed", Engine: "postgres", Host: "127.0.0.1", Port: 5432,
			DatabaseName: "seed_42", DatabaseUser: "seed_42", Status: StatusActive, MaxSpaceBytes: 536870912,
			CreatedAt: *at("2026-11-29T07:20:02.123456789Z"), UserID: 7}},
		"every field": {{DatabaseInstanceID: 1<<62 + 3, Name: "análisis ✓", Engine: "mysql", Host: "db.example.com", Port: 3306,
			DatabaseName: "u7_k3x9q2ab5mw", DatabaseUser: "u7_k3x9q2ab5mw_r", Status: StatusDeleted, UsedSpaceBytes: 8404992,
			MaxSpaceBytes: -1, ReadOnly: true, ReadOnlyReason: "Over its quota", LastActivity: at("1969-07-20T20:17:40.5Z"),
			ErrorMessage: "drop: engine timed out", CreatedAt: *at("2262-04-11T23:47:16.854775807Z"), UserID: -9,
			PurgeAt: at("2026-12-06T00:00:00Z"), RotationDays: 90}},
		"unknown engine and status, zero time, several": {
			{Engine: "oracle", Status: "Weird", Name: "", DatabaseName: "", DatabaseUser: "x"},
			{DatabaseInstanceID: 2, Engine: "", Status: "", CreatedAt: time.Time{}},
			{DatabaseInstanceID: 3, Engine: "postgres", Status: StatusFailed, ErrorMessage: "create: engine refused", Port: 1 << 40},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := unpackItems(packItems(items))
			assert.Equal(t, items, got)
			want, err := json.Marshal(items)
			require.NoError(t, err)
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(gotJSON))
		})
	}
}

// FuzzPackedItems: any item (of the fields that vary in kind) unpacks as packed.
func FuzzPackedItems(f *testing.F) {
	f.Add(int64(42), "seed", "postgres", "seed_42", "seed_42", "Active", int64(1764400802), int64(123), true, "")
	f.Add(int64(-1), "", "", "", "x", "", int64(-62135596800), int64(0), false, "é\x00\xff")
	f.Fuzz(func(t *testing.T, id int64, name, engine, dbName, dbUser, status string, sec, nsec int64, flag bool, reason string) {
		ts := time.Unix(sec, nsec).UTC()
		it := Item{DatabaseInstanceID: id, Name: name, Engine: engine, DatabaseName: dbName, DatabaseUser: dbUser,
			Status: status, CreatedAt: ts, ReadOnly: flag, ReadOnlyReason: reason, UsedSpaceBytes: nsec, Port: int(sec)}
		if flag {
			it.LastActivity, it.PurgeAt = &ts, &ts
		}
		items := []Item{it, {Name: reason}}
		assert.Equal(t, items, unpackItems(packItems(items)))
	})
}
