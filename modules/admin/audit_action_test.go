package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestNoteActionsCannotImitateServiceEvents: "data\u200bbase.created" (a zero width space) and
// "dаtabase.created" (a Cyrillic а) were recorded (201) and listed like the service's own
// database.created. A note's action is plain dotted ASCII, and its texts refuse invisible format
// characters as they refuse controls and bidi overrides.
func TestNoteActionsCannotImitateServiceEvents(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	for _, action := range []string{"data\u200bbase.created", "d\u0430tabase.created", "\ufeffdatabase.created",
		"database\u2060.created", "note manual", "note..manual", ".note", "note.", "café.note"} {
		r := a.Post("/api/audit-events", admin, map[string]any{"action": action})
		require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", action, r.Raw)
		assert.Equal(t, []string{"action"}, r.Fields(), "%q: %s", action, r.Raw)
	}
	for _, field := range []string{"targetType", "targetId"} {
		r := a.Post("/api/audit-events", admin, map[string]any{"action": "note.manual", field: "user\u200b"})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", field, r.Raw)
		assert.Equal(t, []string{field}, r.Fields(), string(r.Raw))
		assert.Contains(t, string(r.Raw), "U+200B")
	}
	r := a.Post("/api/audit-events", admin, map[string]any{"action": "Note_2.follow-up", "targetType": "user"})
	require.Equal(t, http.StatusCreated, r.Status, "plain dotted ASCII is a note's action: %s", r.Raw)
	var note struct {
		ID int64 `json:"id"`
	}
	r.Decode(t, &note)
	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/audit-events/%d", note.ID), Token: admin,
		Body: map[string]any{"action": "d\u0430tabase.created"}})
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, []string{"action"}, r.Fields())
}

// An Admin may amend an event the service recorded (its action stays), but the amended event
// says so in itself: before, PUT {"details": …} on a user.registered event left an event that read
// exactly as one the service had recorded, with made-up details. A manual note stays manual.
func TestAmendedEventsSaySo(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	u := a.Register(t)
	var p struct {
		Items []struct {
			ID int64 `json:"id"`
		} `json:"items"`
	}
	r := a.Get(fmt.Sprintf("/api/audit-events?userId=%d&action=user.registered", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &p)
	require.Len(t, p.Items, 1)
	type event struct {
		Action   string         `json:"action"`
		TargetID string         `json:"targetId"`
		Details  map[string]any `json:"details"`
	}
	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/audit-events/%d", p.Items[0].ID), Token: admin,
		Body: map[string]any{"targetId": "999", "details": map[string]any{"provider": "Password", "by": "bootstrap"}}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var got event
	a.Get(fmt.Sprintf("/api/audit-events/%d", p.Items[0].ID), admin).Decode(t, &got)
	assert.Equal(t, "user.registered", got.Action)
	assert.Equal(t, "999", got.TargetID)
	assert.Equal(t, map[string]any{"provider": "Password", "by": "bootstrap", "amended": true}, got.Details)
	assert.NotContains(t, got.Details, "manual")

	r = a.Post("/api/audit-events", admin, map[string]any{"action": "note.call", "details": map[string]any{"text": "called"}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var note struct {
		ID int64 `json:"id"`
	}
	r.Decode(t, &note)
	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/audit-events/%d", note.ID), Token: admin,
		Body: map[string]any{"details": map[string]any{"text": "emailed"}}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var amended event
	a.Get(fmt.Sprintf("/api/audit-events/%d", note.ID), admin).Decode(t, &amended)
	assert.Equal(t, map[string]any{"text": "emailed", "manual": true, "amended": true}, amended.Details)
}

// A note about a user that never existed is refused naming userId, and nothing is stored; a
// deleted user's id is still fine.
func TestNoteAboutAnUnknownUserIsRefused(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	tag := "note.unknown-user-" + testutil.RandomSuffix()
	r := a.Post("/api/audit-events", admin, map[string]any{"action": tag, "userId": int64(1) << 52})
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, []string{"userId"}, r.Fields(), string(r.Raw))
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = ?", tag).Scan(&n))
	assert.Zero(t, n)

	gone := createUser(t, a, admin, "Gone Person", "User")
	require.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", gone), Token: admin}).Status)
	r = a.Post("/api/audit-events", admin, map[string]any{"action": tag, "userId": gone})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
}
