package admin_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestAuditEventChangedWhileAmendedOrDeleted: an amendment or deletion of an audit event read the
// event without locking it, then wrote over whatever another Admin's amendment or deletion had
// committed meanwhile. An amendment of an event deleted meanwhile answered 200 and recorded an
// audit.event.updated for an event that was gone; a second deletion answered 200 and recorded a
// second audit.event.deleted; an amendment sending only an action put the details back as they
// were before the other amendment, and recorded those stale details as the original. The event
// is now locked when read: the later change waits, then sees the other's result (404 when it
// was deleted). The other Admin's change is held uncommitted in a transaction of the test.
func TestAuditEventChangedWhileAmendedOrDeleted(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	ctx := context.Background()

	note := func(t *testing.T) int64 {
		t.Helper()
		r := a.Post("/api/audit-events", admin, map[string]any{"action": "note.race", "details": map[string]any{"text": "first"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		var e struct{ ID int64 }
		r.Decode(t, &e)
		return e.ID
	}
	// during holds change (on the event ?) uncommitted while req runs, until req waits on a lock.
	during := func(t *testing.T, id int64, change string, req apptest.Request) *apptest.Resp {
		t.Helper()
		tx, err := a.DB.BeginTx(ctx, &sql.TxOptions{})
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		_, err = tx.ExecContext(ctx, "SELECT id FROM audit_events WHERE id = ? FOR UPDATE", id)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, change, id)
		require.NoError(t, err)

		req.Token, req.SkipSync = admin, true
		done := make(chan *apptest.Resp, 1)
		go func() { done <- a.Do(req) }()
		a.AwaitLockWaits(t, 1, "audit_events", func() string {
			select {
			case r := <-done:
				return fmt.Sprintf("the request did not wait for the other change: %d %s", r.Status, r.Raw)
			default:
				return ""
			}
		})
		require.NoError(t, tx.Commit())
		return <-done
	}
	records := func(t *testing.T, action string, id int64) int {
		t.Helper()
		var n int
		require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT count(*) FROM audit_events WHERE action = ? AND target_id = ?",
			action, fmt.Sprint(id)).Scan(&n))
		return n
	}

	t.Run("amended while deleted", func(t *testing.T) {
		id := note(t)
		r := during(t, id, "DELETE FROM audit_events WHERE id = ?",
			apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/audit-events/%d", id), Body: map[string]any{"action": "note.late"}})
		assert.Equal(t, http.StatusNotFound, r.Status, string(r.Raw))
		assert.Zero(t, records(t, "audit.event.updated", id), "no amendment recorded for an event that is gone")
	})
	t.Run("deleted twice", func(t *testing.T) {
		id := note(t)
		r := during(t, id, "DELETE FROM audit_events WHERE id = ?",
			apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/audit-events/%d", id)})
		assert.Equal(t, http.StatusNotFound, r.Status, string(r.Raw))
		assert.Zero(t, records(t, "audit.event.deleted", id), "no deletion recorded for an event already gone")
	})
	t.Run("amended while amended", func(t *testing.T) {
		id := note(t)
		r := during(t, id, `UPDATE audit_events SET details = '{"text": "second", "manual": true, "amended": true}' WHERE id = ?`,
			apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/audit-events/%d", id), Body: map[string]any{"action": "note.renamed"}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var e struct {
			Action  string         `json:"action"`
			Details map[string]any `json:"details"`
		}
		r.Decode(t, &e)
		assert.Equal(t, "note.renamed", e.Action)
		assert.Equal(t, "second", e.Details["text"], "the other amendment's details are kept")
		var original string
		require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT details->'original'->'details'->>'text' FROM audit_events "+
			"WHERE action = 'audit.event.updated' AND target_id = ?", fmt.Sprint(id)).Scan(&original))
		assert.Equal(t, "second", original, "the original recorded is the event as it was amended")
	})
	t.Run("deleted while amended", func(t *testing.T) {
		id := note(t)
		r := during(t, id, `UPDATE audit_events SET details = '{"text": "second", "manual": true, "amended": true}' WHERE id = ?`,
			apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/audit-events/%d", id)})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var original string
		require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT details->'original'->'details'->>'text' FROM audit_events "+
			"WHERE action = 'audit.event.deleted' AND target_id = ?", fmt.Sprint(id)).Scan(&original))
		assert.Equal(t, "second", original, "the original recorded is the event as it was when deleted")
	})
}
