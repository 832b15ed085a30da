package databases

import (
	"context"
	"fmt"
	"time"

	"provisioner/platform/db"
	"provisioner/platform/secrets"
)

// PromoteLogin implements loginRotator. The owner role gets the password in place; the second
// login is made (marked, see loginMarker) a member of the owner role whose sessions start as the
// owner (ALTER ROLE … IN DATABASE … SET role), so what it creates belongs to the owner role.
func (e *postgresEngine) PromoteLogin(ctx context.Context, dbName, owner, login, password string, paused bool) error {
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	access := " LOGIN"
	if paused {
		access = " NOLOGIN"
	}
	if login == owner {
		err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH%s PASSWORD %s VALID UNTIL 'infinity'%s", qi(owner), access, ql(password), e.limit))
		if db.IsCode(err, "42704") { // not made yet: its create sets the stored password
			return nil
		}
		if err != nil {
			return err
		}
	} else {
		if err := e.ensureMarkedRole(ctx, login, password, loginMarker(dbName)); err != nil {
			return err
		}
		if err := e.exec(ctx,
			fmt.Sprintf("ALTER ROLE %s WITH%s VALID UNTIL 'infinity'", qi(login), access),
			fmt.Sprintf("GRANT %s TO %s", qi(owner), qi(login)),
			fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET role = %s", qi(login), qi(dbName), ql(owner))); err != nil {
			return err
		}
	}
	if !paused {
		if err := e.grantConnect(ctx, dbName, login); err != nil {
			return err
		}
	}
	return e.terminate(ctx, "usename = $1", login)
}

// ExpireLogin implements loginRotator: the server itself refuses the password after at.
func (e *postgresEngine) ExpireLogin(ctx context.Context, dbName, owner, login string, at time.Time) error {
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s VALID UNTIL %s", qi(login), ql(at.UTC().Format(time.RFC3339Nano))))
	if db.IsCode(err, "42704") {
		return nil
	}
	return err
}

// RetireLogin implements loginRotator: NOLOGIN, a password nobody holds, expired, sessions
// ended; what the second login owns in the database (made after RESET ROLE) goes to the
// database's owner.
func (e *postgresEngine) RetireLogin(ctx context.Context, dbName, owner, login string) error {
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	if login != owner {
		if ok, err := e.secondLoginExists(ctx, dbName, login); err != nil || !ok {
			return err
		}
	}
	err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH NOLOGIN PASSWORD %s VALID UNTIL 'epoch'", qi(login), ql(secrets.RandomPassword())))
	if db.IsCode(err, "42704") {
		return nil
	}
	if err != nil {
		return err
	}
	if err := e.terminate(ctx, "usename = $1", login); err != nil {
		return err
	}
	if login == owner {
		return nil
	}
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	return e.disown(ctx, dbName, login)
}

// SetSecondLogin implements loginRotator. Allowing grants CONNECT again (a pause revoked it);
// a retired login stays useless (expired, its password held by nobody).
func (e *postgresEngine) SetSecondLogin(ctx context.Context, dbName, owner string, enabled bool) error {
	login := secondLogin(owner)
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	if ok, err := e.secondLoginExists(ctx, dbName, login); err != nil || !ok {
		return err
	}
	if enabled {
		if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH LOGIN%s", qi(login), e.limit)); err != nil {
			return err
		}
		return e.grantConnect(ctx, dbName, login)
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH NOLOGIN", qi(login))); err != nil {
		return err
	}
	return e.terminate(ctx, "usename = $1", login)
}

// DropSecondLogin implements loginRotator: logins refused, sessions ended, then dropped with
// what ties it to any database (dropRole).
func (e *postgresEngine) DropSecondLogin(ctx context.Context, dbName, owner string) error {
	login := secondLogin(owner)
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	if ok, err := e.secondLoginExists(ctx, dbName, login); err != nil || !ok {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH NOLOGIN", qi(login))); err != nil && !db.IsCode(err, "42704") {
		return err
	}
	if err := e.terminate(ctx, "usename = $1", login); err != nil {
		return err
	}
	return e.dropRole(ctx, login)
}

// secondLoginExists tells whether dbName's second login exists; one not carrying its mark is
// ErrRoleTaken and left alone.
func (e *postgresEngine) secondLoginExists(ctx context.Context, dbName, login string) (bool, error) {
	ok, mark, err := e.roleMark(ctx, login)
	if err != nil || !ok {
		return false, err
	}
	if mark != loginMarker(dbName) {
		return false, ErrRoleTaken
	}
	return true, nil
}

var _ loginRotator = (*postgresEngine)(nil)
