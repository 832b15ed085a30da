package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
)

// HeldByAnother reports whether a row of s's table other than self, and not Gone, holds value in
// column (a provider's id): such an id is never stored for self, nor deleted at the provider for it.
func (s Spec) HeldByAnother(ctx context.Context, tx bun.IDB, column, value string, self int64) (bool, error) {
	held, err := tx.NewSelect().Table(s.Rows).Where("? = ?", bun.Ident(column), value).Where("id <> ?", self).
		Where("status <> ?", s.Gone).Exists(ctx)
	if err != nil {
		return false, fmt.Errorf("is %s %q held by another row of %s: %w", column, value, s.Rows, err)
	}
	return held, nil
}

// Texts says which errors of a kind its users read: an error whose chain holds one of the
// provider's (Provider) is shown as stored (StoredError); any other (our database's, with its SQL,
// an audit write's) is shown as Internal (InternalText when "") and only logged.
type Texts struct {
	Internal string
	Provider []func(error) bool
}

// IsA reports whether err's chain holds an E (a Texts.Provider entry).
func IsA[E error](err error) bool { var e E; return errors.As(err, &e) }

// InternalText is what a kind whose Texts set no Internal shows of an error not its provider's.
const InternalText = "internal error (details in the server log)"

// ErrorText implements ErrorTexter for every provisioner embedding a Spec.
func (s Spec) ErrorText(err error) string {
	switch {
	case slices.ContainsFunc(s.Texts.Provider, func(is func(error) bool) bool { return is(err) }):
		return StoredError(err)
	case s.Texts.Internal != "":
		return s.Texts.Internal
	}
	return InternalText
}

// Event is the audit event of action on row id of userID, its target type s.Target.
func (s Spec) Event(action string, userID, id int64, details map[string]any) audit.Event {
	return audit.Event{Action: action, UserID: audit.Int64(userID), TargetType: s.Target, TargetID: strconv.FormatInt(id, 10), Details: details}
}

// StatusOf is row's status, "" for none (a refusal deleted it).
func StatusOf[T any, P interface {
	*T
	Stateful
}](row P) string {
	if row == nil {
		return ""
	}
	return row.Lifecycle().Status
}
