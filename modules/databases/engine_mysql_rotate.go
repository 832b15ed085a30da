package databases

import (
	"context"
	"fmt"
	"time"

	"provisioner/platform/secrets"
)

// PromoteLogin implements loginRotator. The second account (marked, see loginMarker) is given
// what the owner has on the schema now (everything, or what is kept over the quota; SetReadOnly
// switches both, as it does every writer of the schema).
func (e *mysqlEngine) PromoteLogin(ctx context.Context, dbName, owner, login, password string, paused bool) error {
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	lock := " ACCOUNT UNLOCK"
	if paused {
		lock = " ACCOUNT LOCK"
	}
	if login == owner {
		err := e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s%s%s", mqa(owner), ql(password), e.limit, lock))
		if isMySQLCode(err, 1396) { // not made yet: its create sets the stored password
			return nil
		}
		if err != nil {
			return err
		}
		return e.kill(ctx, owner)
	}
	if err := e.ensureMarkedUser(ctx, login, password, loginMarker(dbName)); err != nil {
		return err
	}
	privs, err := e.writerPrivs(ctx)
	if err != nil {
		return err
	}
	if ok, err := e.writable(ctx, dbName, owner); err != nil {
		return err
	} else if !ok {
		privs = readOnlyPrivs
	}
	if err := e.exec(ctx,
		fmt.Sprintf("GRANT %s ON %s TO %s", privs, onSchema(dbName), mqa(login)),
		fmt.Sprintf("ALTER USER %s%s%s", mqa(login), e.limit, lock)); err != nil {
		return err
	}
	return e.kill(ctx, login)
}

// ExpireLogin implements loginRotator: MySQL/MariaDB have no expiry that refuses a login (an
// expired password still connects, restricted), so the finisher retires the login at the end.
func (e *mysqlEngine) ExpireLogin(context.Context, string, string, string, time.Time) error {
	return nil
}

// RetireLogin implements loginRotator: a password nobody holds, the account locked, its sessions
// killed. The account is kept (views and routines it defined keep their definer).
func (e *mysqlEngine) RetireLogin(ctx context.Context, dbName, owner, login string) error {
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	if login != owner {
		if ok, err := e.secondLoginExists(ctx, dbName, login); err != nil || !ok {
			return err
		}
	}
	err := e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s ACCOUNT LOCK", mqa(login), ql(secrets.RandomPassword())))
	if isMySQLCode(err, 1396) {
		return nil
	}
	if err != nil {
		return err
	}
	return e.kill(ctx, login)
}

// SetSecondLogin implements loginRotator: the account locked (sessions killed) or unlocked; a
// retired one stays useless (its password held by nobody).
func (e *mysqlEngine) SetSecondLogin(ctx context.Context, dbName, owner string, enabled bool) error {
	login := secondLogin(owner)
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	if ok, err := e.secondLoginExists(ctx, dbName, login); err != nil || !ok {
		return err
	}
	if enabled {
		return e.exec(ctx, fmt.Sprintf("ALTER USER %s%s ACCOUNT UNLOCK", mqa(login), e.limit))
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER USER %s ACCOUNT LOCK", mqa(login))); err != nil {
		return err
	}
	return e.kill(ctx, login)
}

// DropSecondLogin implements loginRotator: locked, sessions killed (the server does not end the
// sessions of a user it drops), dropped, unmarked.
func (e *mysqlEngine) DropSecondLogin(ctx context.Context, dbName, owner string) error {
	login := secondLogin(owner)
	if err := checkLogin(dbName, owner, login); err != nil {
		return err
	}
	ok, err := e.secondLoginExists(ctx, dbName, login)
	if err != nil || !ok {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER USER IF EXISTS %s ACCOUNT LOCK", mqa(login))); err != nil {
		return err
	}
	if err := e.kill(ctx, login); err != nil {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("DROP USER IF EXISTS %s", mqa(login))); err != nil {
		return err
	}
	if _, err := e.pool.ExecContext(ctx, "DELETE FROM "+mysqlMarks+" WHERE user_name = ? AND marker = ?", login, loginMarker(dbName)); err != nil {
		return fmt.Errorf("mysql: unmark user: %w", err)
	}
	return nil
}

// secondLoginExists tells whether dbName's second account exists; one not carrying its mark is
// ErrRoleTaken and left alone.
func (e *mysqlEngine) secondLoginExists(ctx context.Context, dbName, login string) (bool, error) {
	exists, mark, err := e.userMark(ctx, login)
	if err != nil || !exists {
		return false, err
	}
	if mark != loginMarker(dbName) {
		return false, ErrRoleTaken
	}
	return true, nil
}

var _ loginRotator = (*mysqlEngine)(nil)
