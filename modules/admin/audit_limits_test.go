package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestAuditNotesCannotForgeOrBloat: an admin's note was stored whatever its details (JSON nested
// 5,000 levels deep included) and whatever its action, so it could pass for an event the service
// records (aikey.rotated, user.deleted). Details deeper than 32 levels or over 64 KiB, and actions
// in the service's own namespaces, are now a 400 naming the field, and nothing is stored.
func TestAuditNotesCannotForgeOrBloat(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	count := func() int {
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events").Scan(&n))
		return n
	}
	nested := func(levels int) string {
		return `{"action":"note.manual","details":` + strings.Repeat(`{"a":`, levels) + `1` + strings.Repeat(`}`, levels) + `}`
	}
	refused := func(method, path string, body any, field string) {
		t.Helper()
		before := count()
		r := a.Do(apptest.Request{Method: method, Path: path, Token: admin, Body: body})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
		assert.Equal(t, []string{field}, r.Fields(), string(r.Raw))
		assert.Equal(t, before, count(), "nothing stored")
	}

	refused("POST", "/api/audit-events", nested(5000), "details")
	refused("POST", "/api/audit-events", nested(33), "details")
	refused("POST", "/api/audit-events", map[string]any{"action": "note.manual",
		"details": map[string]any{"text": strings.Repeat("x", 65<<10)}}, "details")
	for _, action := range []string{"aikey.rotated", "user.deleted", "User.Deleted", "audit.event.deleted", "wfauto"} {
		refused("POST", "/api/audit-events", map[string]any{"action": action}, "action")
	}
	r := a.Post("/api/audit-events", admin, nested(32))
	require.Equal(t, http.StatusCreated, r.Status, "32 levels are fine: %s", r.Raw)
	r = a.Post("/api/audit-events", admin, map[string]any{"action": "users.note", "details": map[string]any{"text": "called"}})
	require.Equal(t, http.StatusCreated, r.Status, "only the service's own namespaces are reserved: %s", r.Raw)
	var note struct {
		ID int64 `json:"id"`
	}
	r.Decode(t, &note)

	path := fmt.Sprintf("/api/audit-events/%d", note.ID)
	refused("PUT", path, map[string]any{"action": "user.deleted"}, "action")
	refused("PUT", path, nested(40), "details")

	// An event the service recorded can still be amended without changing its action.
	var id int64
	var action string
	require.NoError(t, a.DB.QueryRow("SELECT id, action FROM audit_events WHERE action LIKE 'user.%' ORDER BY id LIMIT 1").Scan(&id, &action))
	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/audit-events/%d", id), Token: admin,
		Body: map[string]any{"action": action, "details": map[string]any{"note": "checked"}}})
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}
