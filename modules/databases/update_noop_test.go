package databases_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestAdminUpdateRecordsOnlyWhatChanged: an Admin's PUT of a database recorded database.updated
// for every field sent, changed or not (the name untrimmed: "to": "  app data " while the stored
// name is "app data"), and wrote the row even when nothing changed. Now only what changes is
// written and recorded, the name as stored; a PUT that changes nothing answers 200 and records
// nothing, as a user's no-op update does.
func TestAdminUpdateRecordsOnlyWhatChanged(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	path := fmt.Sprintf("/api/database-instances/%d", it.ID)
	events := func() []map[string]any {
		rows, err := a.DB.Query("SELECT details::text FROM audit_events WHERE action = 'database.updated' AND target_id = ? ORDER BY id", fmt.Sprint(it.ID))
		require.NoError(t, err)
		defer rows.Close()
		var out []map[string]any
		for rows.Next() {
			var raw string
			require.NoError(t, rows.Scan(&raw))
			var d map[string]any
			require.NoError(t, json.Unmarshal([]byte(raw), &d))
			out = append(out, d)
		}
		return out
	}
	put := func(body map[string]any) item {
		r := a.Do(apptest.Request{Method: http.MethodPut, Path: path, Token: admin, Body: body})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var got item
		r.Decode(t, &got)
		return got
	}

	got := put(map[string]any{"name": "  " + it.Name + " ", "maxSpaceBytes": it.MaxSpaceBytes})
	assert.Equal(t, it.Name, got.Name)
	assert.Empty(t, events(), "nothing changed: nothing recorded")

	got = put(map[string]any{"name": "  Orders  ", "maxSpaceBytes": it.MaxSpaceBytes})
	assert.Equal(t, "Orders", got.Name)
	assert.Equal(t, []map[string]any{{"name": map[string]any{"from": it.Name, "to": "Orders"}}}, events(),
		"the name as stored, and not the unchanged quota")
}
