package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/paging"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Users manages accounts for administrators.
type Users struct {
	db        *bun.DB
	hasher    *secrets.Hasher
	audit     *audit.Recorder
	releasers []provision.UserReleaser
}

// UserFilter narrows the user list.
type UserFilter struct {
	Search string
	Role   string
	paging.PageQuery
}

// List returns one page of live users, newest first.
func (s *Users) List(ctx context.Context, f UserFilter) (paging.Page[User], error) {
	var rows []userRow
	q := s.db.NewSelect().Model(&rows).Where("deleted_at IS NULL")
	if f.Search != "" {
		search := strings.ToLower(f.Search)
		piece := searchPiece(search)
		// Matches the trigram index users_search_trgm_idx on piece, a part of the search.
		q = q.Where("(lower(email) || ' ' || lower(full_name)) LIKE ?", "%"+escapeLike(piece)+"%")
		if piece != search {
			// The whole search, checked on piece's matches only: strpos is no index condition.
			q = q.Where("strpos(lower(email) || ' ' || lower(full_name), ?) > 0", search)
		}
	}
	if f.Role != "" {
		q = q.Where("role = ?", f.Role)
	}
	if f.Search != "" {
		return db.ListPageFew(ctx, q, &rows, f.PageQuery, viewUser)
	}
	return db.ListPage(ctx, q, &rows, f.PageQuery, viewUser)
}

// searchPiece is the part of search the trigram index is asked for: its longest word (letters
// and digits; among equals, one with a digit, then the last) with the character on each side of
// it, which gives the word's start and end trigrams. A search of several words names rows by its
// rarest word far more often than by its common ones ("seed user 7777"), and the index reads
// every row's entry for a common word's trigrams. A search whose words are all shorter than three
// characters is asked for whole.
func searchPiece(search string) string {
	r := []rune(search)
	word := func(c rune) bool { return unicode.IsLetter(c) || unicode.IsDigit(c) }
	from, to, digit := 0, 0, false
	for i := 0; i < len(r); {
		if !word(r[i]) {
			i++
			continue
		}
		j, d := i, false
		for ; j < len(r) && word(r[j]); j++ {
			d = d || unicode.IsDigit(r[j])
		}
		if n := j - i; n > to-from || n == to-from && (d || !digit) {
			from, to, digit = i, j, d
		}
		i = j
	}
	if to-from < 3 {
		return search
	}
	return string(r[max(from-1, 0):min(to+1, len(r))])
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Get returns a live user, or 404 "User not found" (the guard's 401 when it is the caller's own
// account, deleted while the request was in flight: authn.UserGone).
func (s *Users) Get(ctx context.Context, id int64) (*userRow, error) {
	return s.get(ctx, s.db, id, false)
}

func (s *Users) get(ctx context.Context, db bun.IDB, id int64, lock bool) (*userRow, error) {
	u := new(userRow)
	q := db.NewSelect().Model(u).Where("id = ?", id).Where("deleted_at IS NULL")
	if lock {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			// 401 when it is the caller's own account, deleted while the request was in flight.
			return nil, authn.UserGone(ctx, id)
		}
		return nil, fmt.Errorf("get user %d: %w", id, err)
	}
	return u, nil
}

// CreateUserInput is what an admin sets on a new account.
type CreateUserInput struct {
	FullName, Organization, Email, Password, Role string
}

// Create adds an account with the given role.
func (s *Users) Create(ctx context.Context, in CreateUserInput) (*userRow, error) {
	email, err := authn.NewAccount(in.FullName, in.Email, in.Password)
	if err != nil {
		return nil, err
	}
	hash, err := s.hasher.HashPassword(ctx, in.Password)
	if err != nil {
		return nil, err
	}
	role := in.Role
	if role == "" {
		role = authn.RoleUser
	}
	u := &userRow{Account: db.Account{Email: email, FullName: strings.TrimSpace(in.FullName),
		Organization: strings.TrimSpace(in.Organization), Role: role, PasswordHash: &hash, SecurityStamp: 1}}
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(u).Returning("?Columns").Exec(ctx); err != nil {
			if db.IsUniqueViolation(err) {
				return fault.Conflict("An account with this email already exists")
			}
			return fmt.Errorf("insert user: %w", err)
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.created", UserID: audit.Int64(u.ID),
			TargetType: "user", TargetID: fmt.Sprint(u.ID), Details: map[string]any{"email": u.Email, "role": u.Role}})
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// UpdateUserInput holds the fields to change; nil means no change.
type UpdateUserInput struct {
	FullName, Organization, Email, Role *string
	// AiMonthlyTokenBudget: 0 clears the ceiling.
	AiMonthlyTokenBudget *int64
}

// Update changes an account. A role change applies on the user's next request (the guard reads
// the stored role); demoting the last Admin is a 409. An update that changes nothing writes
// nothing: updatedAt stays, and no user.updated event is recorded.
func (s *Users) Update(ctx context.Context, id int64, in UpdateUserInput) (*userRow, error) {
	if in.FullName != nil && strings.TrimSpace(*in.FullName) == "" {
		return nil, authn.ErrBlankName
	}
	var email string
	if in.Email != nil {
		var err error
		if email, err = authn.ParseEmail(*in.Email); err != nil {
			return nil, err
		}
	}
	var out *userRow
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// Every change of a user, not only a demotion: see lockAdmins.
		if err := lockAdmins(ctx, tx); err != nil {
			return err
		}
		if err := authn.LockCaller(ctx, tx); err != nil { // after lockAdmins: see there
			return err
		}
		u, err := s.get(ctx, tx, id, true)
		if err != nil {
			return err
		}
		before := *u
		if in.FullName != nil {
			u.FullName = strings.TrimSpace(*in.FullName)
		}
		if in.Organization != nil {
			u.Organization = strings.TrimSpace(*in.Organization)
		}
		if in.Email != nil {
			u.Email = email
		}
		if in.Role != nil {
			if u.Role == authn.RoleAdmin && *in.Role != authn.RoleAdmin {
				if err := ensureAnotherAdmin(ctx, tx, u.ID); err != nil {
					return err
				}
			}
			u.Role = *in.Role
		}
		if in.AiMonthlyTokenBudget != nil {
			u.AiMonthlyTokenBudget = nil
			if *in.AiMonthlyTokenBudget > 0 {
				u.AiMonthlyTokenBudget = in.AiMonthlyTokenBudget
			}
		}
		changed := changes(&before, u)
		if len(changed) == 0 {
			out = u // nothing to change: updatedAt and the audit log stay as they are
			return nil
		}
		// The row as stored, scanned into a fresh value: a column the update's triggers set to NULL
		// (a change of the email clears email_verified_at) is not left at its old value in u.
		stored := new(userRow)
		if _, err := tx.NewUpdate().Model(u).Column("full_name", "organization", "email", "role", "ai_monthly_token_budget").
			Set("updated_at = now()").WherePK().Returning("?TableColumns").Exec(ctx, stored); err != nil {
			if db.IsUniqueViolation(err) {
				return fault.Conflict("An account with this email already exists")
			}
			return fmt.Errorf("update user %d: %w", id, err)
		}
		u = stored
		if before.Role != u.Role {
			if err := s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.role.changed", UserID: audit.Int64(u.ID),
				TargetType: "user", TargetID: fmt.Sprint(u.ID), Details: map[string]any{"from": before.Role, "to": u.Role}}); err != nil {
				return err
			}
		}
		out = u
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.updated", UserID: audit.Int64(u.ID),
			TargetType: "user", TargetID: fmt.Sprint(u.ID), Details: changed})
	})
	return out, err
}

func changes(a, b *userRow) map[string]any {
	d := map[string]any{}
	if a.FullName != b.FullName {
		d["fullName"] = map[string]string{"from": a.FullName, "to": b.FullName}
	}
	if a.Organization != b.Organization {
		d["organization"] = map[string]string{"from": a.Organization, "to": b.Organization}
	}
	if a.Email != b.Email {
		d["email"] = map[string]string{"from": a.Email, "to": b.Email}
	}
	if a.Role != b.Role {
		d["role"] = map[string]string{"from": a.Role, "to": b.Role}
	}
	if !equalBudget(a.AiMonthlyTokenBudget, b.AiMonthlyTokenBudget) {
		d["aiMonthlyTokenBudget"] = map[string]*int64{"from": a.AiMonthlyTokenBudget, "to": b.AiMonthlyTokenBudget}
	}
	return d
}

func equalBudget(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// Delete removes an account: it can no longer sign in (its tokens die with the security stamp),
// and every module marks the user's resources for deprovisioning in the same transaction; the
// background finisher then deletes them at the providers. Deleting the last Admin is a 409.
func (s *Users) Delete(ctx context.Context, id int64) error {
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockAdmins(ctx, tx); err != nil {
			return err
		}
		if err := authn.LockCaller(ctx, tx); err != nil { // after lockAdmins: see there
			return err
		}
		u, err := s.get(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if u.Role == authn.RoleAdmin {
			if err := ensureAnotherAdmin(ctx, tx, u.ID); err != nil {
				return err
			}
		}
		if _, err := tx.NewUpdate().Model(u).Set("deleted_at = now()").Set("security_stamp = security_stamp + 1").
			Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("delete user %d: %w", id, err)
		}
		for _, r := range s.releasers {
			if err := r.ReleaseUser(ctx, tx, id); err != nil {
				return fmt.Errorf("release resources of user %d: %w", id, err)
			}
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.deleted", UserID: audit.Int64(u.ID),
			TargetType: "user", TargetID: fmt.Sprint(u.ID), Details: map[string]any{"email": u.Email}})
	})
	return err
}

// lastAdminLockKey is the transaction-scoped advisory lock of lockAdmins.
const lastAdminLockKey = 7_310_442_201

// lockAdmins serialises the changes of users (updates and deletions): each takes this lock first,
// so a demotion or deletion counts the Admins after the previous one committed. It is an advisory
// lock, not row locks on every Admin: a transaction taking it holds no row yet, and it then locks
// the caller's row (authn.LockCaller, FOR KEY SHARE) and the target's (FOR UPDATE). Without it
// first, two Admins changing each other at once (renaming, demoting or deleting each other) each
// held their own row and waited for the other's: a deadlock, and a 503 for one of them. With it,
// the second waits holding nothing, then goes on (or finds its caller deleted: 401, or demoted: 403).
func lockAdmins(ctx context.Context, tx bun.Tx) error {
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", lastAdminLockKey)
	if err != nil {
		return fmt.Errorf("lock admins: %w", err)
	}
	return nil
}

func ensureAnotherAdmin(ctx context.Context, tx bun.Tx, except int64) error {
	n, err := tx.NewSelect().Table("users").Where("role = 'Admin'").Where("deleted_at IS NULL").
		Where("id <> ?", except).Count(ctx)
	if err != nil {
		return fmt.Errorf("count admins: %w", err)
	}
	if n == 0 {
		return fault.Conflict("The last Admin cannot be demoted or deleted")
	}
	return nil
}
