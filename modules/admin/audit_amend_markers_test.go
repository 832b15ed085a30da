package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestAuditAmendmentThatChangesNothing: `PUT {}` (or the event sent back as read) marked the
// event amended and wrote an audit.event.updated with `updated: {}`. It now answers 200 with the
// event as it is and writes nothing, as a user's no-op update does; a real change is still marked
// and recorded.
func TestAuditAmendmentThatChangesNothing(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	r := a.Post("/api/audit-events", admin, map[string]any{"action": "note.call", "targetType": "user", "targetId": "3",
		"details": map[string]any{"text": "called", "n": 2, "nested": map[string]any{"a": []any{1, "x"}}}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var note struct {
		ID      int64          `json:"id"`
		Action  string         `json:"action"`
		Details map[string]any `json:"details"`
	}
	r.Decode(t, &note)
	path := fmt.Sprintf("/api/audit-events/%d", note.ID)
	before := string(a.Get(path, admin).Env.Data)
	records := func() int {
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'audit.event.updated' AND target_id = ?", fmt.Sprint(note.ID)).Scan(&n))
		return n
	}
	for name, body := range map[string]map[string]any{
		"empty":             {},
		"same fields":       {"action": "note.call", "targetType": "user", "targetId": "3"},
		"details as read":   {"details": note.Details},
		"details, unmarked": {"details": map[string]any{"nested": map[string]any{"a": []any{1, "x"}}, "n": 2.0, "text": "called"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := a.Do(apptest.Request{Method: http.MethodPut, Path: path, Token: admin, Body: body})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.JSONEq(t, before, string(r.Env.Data), "answers with the event as it is")
			assert.JSONEq(t, before, string(a.Get(path, admin).Env.Data), "the event is unchanged (not marked amended)")
			assert.Zero(t, records(), "no audit.event.updated")
		})
	}
	r = a.Do(apptest.Request{Method: http.MethodPut, Path: path, Token: admin, Body: map[string]any{"targetId": "4"}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var amended struct {
		Details map[string]any `json:"details"`
	}
	r.Decode(t, &amended)
	assert.Equal(t, true, amended.Details["amended"])
	assert.Equal(t, 1, records(), "a real change is recorded")
}

// TestAmendmentCannotMarkAServiceEventManual: amending an event the service recorded with
// details {"manual": true} stored that marker, so the event read as an Admin's note (while an
// Admin's note keeps it whatever the change sends). The markers are the service's: a service
// event never becomes manual, a note stays manual.
func TestAmendmentCannotMarkAServiceEventManual(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	u := a.Register(t)
	var id int64
	require.NoError(t, a.DB.QueryRow("SELECT id FROM audit_events WHERE action = 'user.registered' AND user_id = ?", u.ID).Scan(&id))
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/audit-events/%d", id), Token: admin,
		Body: map[string]any{"details": map[string]any{"manual": true, "why": "looked odd"}}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var e struct {
		Details map[string]any `json:"details"`
	}
	a.Get(fmt.Sprintf("/api/audit-events/%d", id), admin).Decode(t, &e)
	assert.Equal(t, map[string]any{"amended": true, "why": "looked odd"}, e.Details, "no manual marker on a service event")

	r = a.Post("/api/audit-events", admin, map[string]any{"action": "note.call"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var note struct{ ID int64 }
	r.Decode(t, &note)
	r = a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/audit-events/%d", note.ID), Token: admin,
		Body: map[string]any{"details": map[string]any{"manual": false, "text": "x"}}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var n struct {
		Details map[string]any `json:"details"`
	}
	a.Get(fmt.Sprintf("/api/audit-events/%d", note.ID), admin).Decode(t, &n)
	assert.Equal(t, map[string]any{"amended": true, "manual": true, "text": "x"}, n.Details, "a note stays manual")
}

// TestAuditDetailsRefuseNumbersJSONDoesNotKeep: a number in a note's details beyond ±2^53-1 was
// stored rounded (12345678901234567890 read back as 12345678901234567000), silently. It is now a
// 400 naming details, on create and amend; the largest exact integer is kept as sent.
func TestAuditDetailsRefuseNumbersJSONDoesNotKeep(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	for name, details := range map[string]map[string]any{
		"big integer":      {"orderId": uint64(12345678901234567890)},
		"nested, negative": {"list": []any{map[string]any{"n": int64(-9007199254740993)}}},
		"huge float":       {"x": 1e300},
	} {
		r := a.Post("/api/audit-events", admin, map[string]any{"action": "note.order", "details": details})
		if assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", name, r.Raw) {
			assert.Equal(t, []string{"details"}, r.Fields(), name)
		}
	}
	r := a.Post("/api/audit-events", admin, map[string]any{"action": "note.order", "details": map[string]any{"orderId": int64(9007199254740991), "neg": int64(-9007199254740991)}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var e struct {
		ID int64 `json:"id"`
	}
	r.Decode(t, &e)
	path := fmt.Sprintf("/api/audit-events/%d", e.ID)
	assert.Contains(t, string(a.Get(path, admin).Raw), `"orderId":9007199254740991`, "kept exactly")
	r = a.Do(apptest.Request{Method: http.MethodPut, Path: path, Token: admin, Body: map[string]any{"details": map[string]any{"orderId": uint64(1 << 60)}}})
	if assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw)) {
		assert.Equal(t, []string{"details"}, r.Fields())
	}
	assert.Contains(t, string(a.Get(path, admin).Raw), `"orderId":9007199254740991`, "the refused amendment changed nothing")
}
