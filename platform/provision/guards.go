package provision

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
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

// ProviderText is the ErrorTexter of a provisioner whose users see its errors: err's text as
// stored (StoredError) when its chain holds one of the provider's errors (targets, pointers as
// errors.As takes them), internal otherwise (our database's error, with its SQL, is only logged).
func ProviderText(err error, internal string, targets ...any) string {
	for _, t := range targets {
		if errors.As(err, t) {
			return StoredError(err)
		}
	}
	return internal
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
