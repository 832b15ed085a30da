package auth

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/db"
	"provisioner/platform/emailaddr"
)

// emailForms is migration 20261124010000_email_forms: every users row (and OAuth identity) whose
// email emailaddr.Normalize spells otherwise gets that spelling, unless another live account has it
// (then the row is left, and of two rows needing it the older wins). Each change or refusal is
// reported as a WARNING and an audit event (user.email_normalized, user.email_not_normalized). In Go
// so that addresses are spelt exactly as login and registration spell them.
var emailForms = db.GoMigration{Name: "20261124010000_email_forms", Up: normalizeStoredEmails,
	// Nothing to undo: every rewritten email is the spelling the service uses, and what each was
	// before is in its user.email_normalized audit event.
	Down: func(context.Context, bun.Tx) error { return nil }}

func normalizeStoredEmails(ctx context.Context, tx bun.Tx) error {
	// warn raises a WARNING from a DO block, which needs no privilege (a pg_temp function needed
	// TEMP on the control database). A DO block takes no parameters, so the message travels in a
	// setting local to the transaction, bound as a value: nothing stored is ever quoted into SQL.
	warn := func(format string, args ...any) error {
		if _, err := tx.ExecContext(ctx, "SELECT set_config('provisioner.migration_warning', ?, true)", fmt.Sprintf(format, args...)); err != nil {
			return fmt.Errorf("warn: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DO $$ BEGIN RAISE WARNING '%', current_setting('provisioner.migration_warning'); END $$`); err != nil {
			return fmt.Errorf("warn: %w", err)
		}
		return nil
	}
	event := func(userID int64, action string, details map[string]any) error {
		raw, err := json.Marshal(details)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO audit_events (user_id, action, target_type, target_id, details)
			VALUES (?, ?, 'user', ?, ?::jsonb)`, userID, action, fmt.Sprint(userID), string(raw))
		return err
	}
	var users []struct {
		ID    int64
		Email string
	}
	if err := tx.NewSelect().Table("users").Column("id", "email").OrderExpr("id").For("UPDATE").Scan(ctx, &users); err != nil {
		return fmt.Errorf("read users: %w", err)
	}
	for _, u := range users {
		addr, err := emailaddr.Normalize(u.Email)
		if err == nil && addr == u.Email {
			continue
		}
		if err != nil {
			if err := warn("users.id %d: email %q is not an address the service accepts; left as it is", u.ID, u.Email); err != nil {
				return err
			}
			if err := event(u.ID, "user.email_not_normalized", map[string]any{"email": u.Email, "reason": "not an address the service accepts"}); err != nil {
				return err
			}
			continue
		}
		var other int64
		err = tx.NewSelect().Table("users").Column("id").Where("lower(email) = ?", addr).Where("id <> ?", u.ID).
			Where("deleted_at IS NULL").OrderExpr("id").Limit(1).Scan(ctx, &other)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("find users with %q: %w", addr, err)
		}
		if other != 0 {
			if err := warn("users.id %d: email %q is spelt %s, the email of users.id %d; left as it is", u.ID, u.Email, addr, other); err != nil {
				return err
			}
			if err := event(u.ID, "user.email_not_normalized", map[string]any{"email": u.Email, "address": addr, "conflictsWith": other}); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.NewUpdate().Table("users").Set("email = ?", addr).Set("updated_at = ?", time.Now()).Where("id = ?", u.ID).Exec(ctx); err != nil {
			return fmt.Errorf("rewrite the email of users.id %d: %w", u.ID, err)
		}
		if err := warn("users.id %d: email %q is now %s", u.ID, u.Email, addr); err != nil {
			return err
		}
		if err := event(u.ID, "user.email_normalized", map[string]any{"from": u.Email, "to": addr}); err != nil {
			return err
		}
	}
	var ids []struct {
		ID    int64
		Email string
	}
	if err := tx.NewSelect().Table("user_identities").Column("id", "email").OrderExpr("id").For("UPDATE").Scan(ctx, &ids); err != nil {
		return fmt.Errorf("read identities: %w", err)
	}
	for _, i := range ids {
		if addr, err := emailaddr.Normalize(i.Email); err == nil && addr != i.Email {
			if _, err := tx.NewUpdate().Table("user_identities").Set("email = ?", addr).Where("id = ?", i.ID).Exec(ctx); err != nil {
				return fmt.Errorf("rewrite the email of user_identities.id %d: %w", i.ID, err)
			}
		}
	}
	return nil
}
