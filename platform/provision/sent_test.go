package provision_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/provision"
)

// TestSentMarkerKeepsTheFirstRequest: the first Mark of a row is fresh and keeps its body; a
// later one returns that first body (not its own) until Unmark, after which a Mark is fresh again.
// A record without a body (request NULL) is sent, with the guess returned and original false.
func TestSentMarkerKeepsTheFirstRequest(t *testing.T) {
	db, p := setup(t)
	ctx := context.Background()
	m := provision.SentMarker{Table: p.table + "_sent", Ref: "thing_id"}
	_, err := db.Exec(`CREATE TABLE ` + m.Table + ` (thing_id bigint PRIMARY KEY, request text)`)
	require.NoError(t, err)

	sent, _, err := m.Sent(ctx, db, 1)
	require.NoError(t, err)
	assert.False(t, sent, "never marked")

	body, fresh, original, err := m.Mark(ctx, db, 1, []byte("first"))
	require.NoError(t, err)
	assert.Equal(t, "first", string(body))
	assert.True(t, fresh)
	assert.True(t, original)

	body, fresh, original, err = m.Mark(ctx, db, 1, []byte("second"))
	require.NoError(t, err)
	assert.Equal(t, "first", string(body), "the first request is sent again")
	assert.False(t, fresh)
	assert.True(t, original)

	sent, stored, err := m.Sent(ctx, db, 1)
	require.NoError(t, err)
	assert.True(t, sent)
	assert.Equal(t, "first", string(stored))

	require.NoError(t, m.Unmark(ctx, db, 1))
	_, fresh, _, err = m.Mark(ctx, db, 1, []byte("third"))
	require.NoError(t, err)
	assert.True(t, fresh, "fresh again once unmarked")

	_, err = db.Exec(`INSERT INTO ` + m.Table + ` (thing_id) VALUES (2)`)
	require.NoError(t, err)
	body, fresh, original, err = m.Mark(ctx, db, 2, []byte("guess"))
	require.NoError(t, err)
	assert.Equal(t, "guess", string(body))
	assert.False(t, fresh)
	assert.False(t, original, "the first request is not known")
}
