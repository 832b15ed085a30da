// Package provisiontest is the one test suite every Provisioner passes: the promises written on
// provision.Provisioner (idempotent Create, Delete that does not fail when the resource is gone),
// checked against the module's real table and its provider (or protocol-faithful fake), with the
// crash windows the finisher must survive: an attempt whose outcome was rolled back.
package provisiontest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// Harness adapts one kind of resource to the suite.
type Harness struct {
	DB          *bun.DB
	Provisioner provision.Provisioner
	// NewRow stores a fresh row in its in-between create status and returns its id.
	NewRow func(t *testing.T) int64
	// MarkDeleting moves a row to its in-between delete status.
	MarkDeleting func(t *testing.T, id int64)
	// External counts the provider's resources for row id.
	External func(t *testing.T, id int64) int
	// Status reads the row's status.
	Status func(t *testing.T, id int64) string
	// Created and Deleted are the final statuses of the two verbs.
	Created, Deleted string
}

// attempt runs one verb in a transaction that commits, or rolls back as if the process died
// right after the provider answered.
func attempt(t *testing.T, h Harness, id int64, create, commit bool) error {
	t.Helper()
	ctx := context.Background()
	tx, err := h.DB.BeginTx(ctx, &sql.TxOptions{})
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "SELECT 1 FROM "+h.Provisioner.(provision.Queue).Table()+" WHERE id = ? FOR UPDATE", id)
	require.NoError(t, err)
	if create {
		_, err = h.Provisioner.Create(ctx, provision.CreateRequest{ResourceID: id, Tx: tx})
	} else {
		_, err = h.Provisioner.Delete(ctx, provision.DeleteRequest{ResourceID: id, Tx: tx})
	}
	if commit && err == nil {
		require.NoError(t, tx.Commit())
	} else {
		require.NoError(t, tx.Rollback())
	}
	return err
}

// Run checks the promises.
func Run(t *testing.T, h Harness) {
	_, ok := h.Provisioner.(provision.Queue)
	require.True(t, ok, "the provisioner implements provision.Queue")

	t.Run("create adopts what a lost attempt made", func(t *testing.T) {
		id := h.NewRow(t)
		require.NoError(t, attempt(t, h, id, true, false)) // the provider acted; the outcome was lost
		require.NoError(t, attempt(t, h, id, true, true))
		assert.Equal(t, h.Created, h.Status(t, id))
		assert.Equal(t, 1, h.External(t, id), "exactly one resource at the provider")
	})

	t.Run("delete is idempotent", func(t *testing.T) {
		id := h.NewRow(t)
		require.NoError(t, attempt(t, h, id, true, true))
		h.MarkDeleting(t, id)
		require.NoError(t, attempt(t, h, id, false, false)) // deleted at the provider, outcome lost
		require.NoError(t, attempt(t, h, id, false, true), "deleting what is gone is not an error")
		assert.Equal(t, h.Deleted, h.Status(t, id))
		assert.Zero(t, h.External(t, id))
	})

	t.Run("delete of a resource never created", func(t *testing.T) {
		id := h.NewRow(t)
		h.MarkDeleting(t, id)
		require.NoError(t, attempt(t, h, id, false, true))
		assert.Equal(t, h.Deleted, h.Status(t, id))
		assert.Zero(t, h.External(t, id))
	})
}
