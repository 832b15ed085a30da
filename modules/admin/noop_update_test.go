package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// An update that changes nothing ({}, only members the route ignores, the values the user already
// has) answers 200 with the user and writes nothing: updatedAt stays, and no user.updated event.
func TestNoOpUpdateWritesNothing(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	id := createUser(t, a, admin, "Still Person", "User")
	path := fmt.Sprintf("/api/users/%d", id)
	var was struct {
		FullName  string `json:"fullName"`
		UpdatedAt string `json:"updatedAt"`
	}
	a.Get(path, admin).Decode(t, &was)
	updates := func() int {
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'user.updated' AND target_id = ?", fmt.Sprint(id)).Scan(&n))
		return n
	}
	for name, body := range map[string]map[string]any{
		"empty":         {},
		"ignored":       {"id": 424242, "createdAt": "2020-01-01T00:00:00Z", "nickname": "x"},
		"same values":   {"fullName": "Still Person", "organization": "Corp", "role": "User"},
		"same, trimmed": {"fullName": "  Still Person "},
	} {
		t.Run(name, func(t *testing.T) {
			r := a.Do(apptest.Request{Method: http.MethodPut, Path: path, Token: admin, Body: body})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			var now struct {
				ID        int64  `json:"id"`
				FullName  string `json:"fullName"`
				UpdatedAt string `json:"updatedAt"`
			}
			r.Decode(t, &now)
			assert.Equal(t, id, now.ID, "answers with the user")
			assert.Equal(t, was.UpdatedAt, now.UpdatedAt, "updatedAt stays")
			assert.Zero(t, updates(), "no audit event")
		})
	}
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: path, Token: admin, Body: map[string]any{"fullName": "Moved Person"}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var moved struct {
		UpdatedAt string `json:"updatedAt"`
	}
	r.Decode(t, &moved)
	assert.NotEqual(t, was.UpdatedAt, moved.UpdatedAt, "a real change is still recorded")
	assert.Equal(t, 1, updates())
}
