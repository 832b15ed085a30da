package provision

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// SentMarker names a module's table that records, for a row (Ref, its id, unique), that a create
// of it may have reached the provider, with the request sent (request, text; NULL when not known:
// a record from before requests were kept). A delete reads it to know whether the provider may
// hold the resource at all, and which request to repeat to learn its id.
type SentMarker struct{ Table, Ref string }

// Mark commits, through idb (a connection of its own: the row's transaction would roll it back
// with a crash), that a create of row id may reach the provider, with body, the request about to
// be sent. fresh reports that no earlier attempt may have reached it. When one may have, the body
// of the first is returned instead (the same idempotency key must go with the same body);
// original is false when that body is not known: then body is a guess.
func (m SentMarker) Mark(ctx context.Context, idb bun.IDB, id int64, body []byte) (sent []byte, fresh, original bool, err error) {
	res, err := idb.ExecContext(ctx, "INSERT INTO ? (?, request) VALUES (?, ?) ON CONFLICT DO NOTHING",
		bun.Ident(m.Table), bun.Ident(m.Ref), id, string(body))
	if err != nil {
		return nil, false, false, fmt.Errorf("record the create of %s %d: %w", m.Ref, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, false, false, fmt.Errorf("record the create of %s %d: %w", m.Ref, id, err)
	}
	if n == 1 {
		return body, true, true, nil
	}
	_, stored, err := m.Sent(ctx, idb, id)
	if err != nil || stored == nil { // nil: a record from before requests were kept
		return body, false, false, err
	}
	return stored, false, true, nil
}

// Unmark records, within tx, that the provider holds nothing for row id.
func (m SentMarker) Unmark(ctx context.Context, tx bun.IDB, id int64) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM ? WHERE ? = ?", bun.Ident(m.Table), bun.Ident(m.Ref), id); err != nil {
		return fmt.Errorf("record that %s %d is not at the provider: %w", m.Ref, id, err)
	}
	return nil
}

// Sent reports whether a create of row id may have reached the provider, and the body it was
// sent with (nil when not known).
func (m SentMarker) Sent(ctx context.Context, tx bun.IDB, id int64) (sent bool, body []byte, err error) {
	var stored sql.NullString
	err = tx.QueryRowContext(ctx, "SELECT request FROM ? WHERE ? = ?", bun.Ident(m.Table), bun.Ident(m.Ref), id).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil, nil
	case err != nil:
		return false, nil, fmt.Errorf("was %s %d sent: %w", m.Ref, id, err)
	case stored.Valid:
		return true, []byte(stored.String), nil
	}
	return true, nil, nil
}
