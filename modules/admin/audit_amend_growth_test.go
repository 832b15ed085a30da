package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestAuditAmendmentRecordDoesNotDouble: audit.event.updated held the original event and the
// whole amended one, so amending the latest such record (even with `{}`, then) recorded both copies of
// it again: each record twice the previous, a 60 KiB note 16 MB after eight requests and over
// PostgreSQL's 1 GB limit after some fourteen. The record now holds the original and only the
// fields the change set, so each grows by what the request sent.
func TestAuditAmendmentRecordDoesNotDouble(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	r := a.Post("/api/audit-events", admin, map[string]any{"action": "note.big", "details": map[string]any{"text": strings.Repeat("x", 60<<10)}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var e struct{ ID int64 }
	r.Decode(t, &e)

	id, size := e.ID, 60<<10
	for i := 0; i < 8; i++ {
		r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/audit-events/%d", id), Token: admin, Body: map[string]any{"targetId": fmt.Sprint(i)}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var next int64
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT id, length(details::text) FROM audit_events WHERE action = 'audit.event.updated' AND target_id = ?",
			fmt.Sprint(id)).Scan(&next, &n))
		assert.Less(t, n, size+2048, "amendment %d: the record of a one-field change is its original and little more", i)
		id, size = next, n
	}

	// What the record holds: the original whole, and the fields the change set.
	r = a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/audit-events/%d", e.ID), Token: admin,
		Body: map[string]any{"targetId": "7", "details": map[string]any{"text": "short"}}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var raw string
	require.NoError(t, a.DB.QueryRow("SELECT details::text FROM audit_events WHERE action = 'audit.event.updated' AND target_id = ? ORDER BY id DESC LIMIT 1",
		fmt.Sprint(e.ID)).Scan(&raw))
	var rec struct {
		Original map[string]any `json:"original"`
		Updated  map[string]any `json:"updated"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &rec))
	assert.Equal(t, "note.big", rec.Original["action"])
	assert.Len(t, rec.Original["details"].(map[string]any)["text"], 60<<10, "the original whole")
	assert.Equal(t, map[string]any{"targetId": "7", "details": map[string]any{"text": "short", "amended": true, "manual": true}}, rec.Updated)
}
