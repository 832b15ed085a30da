package app_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// Text users type lands in audit details: the six characters \u0000 there (with quotes and
// backslashes around them) made recording the event fail, and the request answered 500. Each
// request below is answered as it would be without them, and the event reads back as typed.
func TestUserTextWithEscapesInAuditDetails(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"Ai:BaseUrl": "http://127.0.0.1:9", "Ai:ApiKey": "upstream-key-for-tests",
		"Ai:DefaultModel": "fake-model"}))
	admin := a.AdminToken(t)
	u := a.Register(t)
	const typed = `Bob's "key" \u0000 \\u0000 \ end`

	r := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": typed})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	r = a.Get("/api/audit-events?action=aikey.created", admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var page struct {
		Items []struct {
			Details map[string]any `json:"details"`
		} `json:"items"`
	}
	r.Decode(t, &page)
	require.NotEmpty(t, page.Items, string(r.Raw))
	assert.Equal(t, typed, page.Items[0].Details["name"])

	r = a.Post("/api/audit-events", admin, map[string]any{"action": "note", "targetType": "user", "targetId": typed,
		"details": map[string]any{"text": typed, typed: []any{typed}}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var note struct {
		ID       int64          `json:"id"`
		TargetID string         `json:"targetId"`
		Details  map[string]any `json:"details"`
	}
	r.Decode(t, &note)
	assert.Equal(t, typed, note.TargetID)
	assert.Equal(t, typed, note.Details["text"])
	assert.Equal(t, []any{typed}, note.Details[typed])

	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/audit-events/%d", note.ID), Token: admin,
		Body: map[string]any{"details": map[string]any{"text": typed + " amended"}}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r = a.Get(fmt.Sprintf("/api/audit-events/%d", note.ID), admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &note)
	assert.Equal(t, typed+" amended", note.Details["text"])
}
