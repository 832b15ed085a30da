package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// MariaDB and MySQL 5.7 have no comment on a user, so the marks of credential users live in a
// table of the service's own on the server (no tenant is granted anything on it).
const mysqlMarks = "`provisioner_meta`.`credential_users`"

func (e *mysqlEngine) ensureMarks(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.marksReady {
		return nil
	}
	if err := e.exec(ctx, "CREATE DATABASE IF NOT EXISTS `provisioner_meta` CHARACTER SET utf8mb4",
		"CREATE TABLE IF NOT EXISTS "+mysqlMarks+" (user_name VARCHAR(80) NOT NULL PRIMARY KEY, marker VARCHAR(100) NOT NULL)"); err != nil {
		return err
	}
	e.marksReady = true
	return nil
}

// userMark tells whether user exists (on any host) and the mark recorded for it ("" if none).
func (e *mysqlEngine) userMark(ctx context.Context, user string) (bool, string, error) {
	if err := e.ensureMarks(ctx); err != nil {
		return false, "", err
	}
	var exists bool
	if err := e.pool.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM mysql.user WHERE user = ?)", user).Scan(&exists); err != nil {
		return false, "", fmt.Errorf("mysql: %w", err)
	}
	var mark string
	err := e.pool.QueryRowContext(ctx, "SELECT marker FROM "+mysqlMarks+" WHERE user_name = ?", user).Scan(&mark)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, "", fmt.Errorf("mysql: %w", err)
	}
	return exists, mark, nil
}

// credentialUser tells whether user exists; it is ErrRoleTaken when it does but was not made for
// the credential of marker. A user without any mark, made before users were marked, is that
// credential's (and is marked now) only when it has exactly the footprint the service gave the
// credential users it made then: one account, user@'%', that is not dbName's own login user
// (named after the database), with USAGE on *.* and privileges on every table of dbName's schema
// (named escaped or not) and nothing else, none with GRANT OPTION. A tenant's owner, a role, or
// a user made by hand that has anything elsewhere is never taken for one.
func (e *mysqlEngine) credentialUser(ctx context.Context, dbName, user, marker string) (bool, error) {
	exists, mark, err := e.userMark(ctx, user)
	if err != nil || !exists {
		return false, err
	}
	if mark == marker {
		return true, nil
	}
	if mark != "" || user == dbName {
		return false, ErrRoleTaken
	}
	var accounts int
	var anyHost bool
	if err := e.pool.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(MAX(host = '%'), 0) FROM mysql.user WHERE user = ?", user).
		Scan(&accounts, &anyHost); err != nil {
		return false, fmt.Errorf("mysql: %w", err)
	}
	if accounts != 1 || !anyHost {
		return false, ErrRoleTaken
	}
	rows, err := e.pool.QueryContext(ctx, "SHOW GRANTS FOR "+mqa(user))
	if err != nil {
		return false, fmt.Errorf("mysql: grants of %s: %w", user, err)
	}
	var grants []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return false, fmt.Errorf("mysql: grants of %s: %w", user, err)
		}
		grants = append(grants, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("mysql: grants of %s: %w", user, err)
	}
	onSchemas := []string{" ON " + mqi(dbName) + ".* TO ", " ON " + onSchema(dbName) + " TO "}
	onDB := false
	for _, g := range grants {
		switch {
		case strings.Contains(g, "WITH GRANT OPTION"):
			return false, ErrRoleTaken
		case strings.HasPrefix(g, "GRANT USAGE ON *.* TO "):
		case strings.HasPrefix(g, "GRANT ") && (strings.Contains(g, onSchemas[0]) || strings.Contains(g, onSchemas[1])):
			onDB = true
		default:
			return false, ErrRoleTaken
		}
	}
	if !onDB {
		return false, ErrRoleTaken
	}
	if _, err := e.pool.ExecContext(ctx, "REPLACE INTO "+mysqlMarks+" (user_name, marker) VALUES (?, ?)", user, marker); err != nil {
		return false, fmt.Errorf("mysql: mark user: %w", err)
	}
	return true, nil
}

func (e *mysqlEngine) RoleExists(ctx context.Context, user string) (bool, error) {
	var exists bool
	if err := e.pool.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM mysql.user WHERE user = ?)", user).Scan(&exists); err != nil {
		return false, fmt.Errorf("mysql: %w", err)
	}
	return exists, nil
}

// ensureMarkedUser records the mark, then creates the user; a user of that name that exists
// without this mark is ErrRoleTaken. A crash between the two leaves a mark for a user that does
// not exist, which the retry uses.
func (e *mysqlEngine) ensureMarkedUser(ctx context.Context, user, password, marker string) error {
	exists, mark, err := e.userMark(ctx, user)
	if err != nil {
		return err
	}
	if exists {
		if mark != marker {
			return ErrRoleTaken
		}
		return e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
	}
	if _, err := e.pool.ExecContext(ctx, "REPLACE INTO "+mysqlMarks+" (user_name, marker) VALUES (?, ?)", user, marker); err != nil {
		return fmt.Errorf("mysql: mark user: %w", err)
	}
	err = e.exec(ctx, fmt.Sprintf("CREATE USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
	if isMySQLCode(err, 1396) { // created concurrently by someone else: not ours
		_, _ = e.pool.ExecContext(ctx, "DELETE FROM "+mysqlMarks+" WHERE user_name = ? AND marker = ?", user, marker)
		return ErrRoleTaken
	}
	return err
}

// writable tells whether role may write to dbName now (false while it is over its quota).
func (e *mysqlEngine) writable(ctx context.Context, dbName, role string) (bool, error) {
	var ins string
	err := e.pool.QueryRowContext(ctx, "SELECT Insert_priv FROM mysql.db WHERE Db = ? AND User = ? AND Host = '%'", grantDB(dbName), role).Scan(&ins)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("mysql: %w", err)
	}
	return ins == "Y", nil
}

func (e *mysqlEngine) CreateUser(ctx context.Context, dbName, owner, user, password string, readOnly bool, marker string) error {
	if err := checkNames(dbName, owner, user); err != nil {
		return err
	}
	if err := e.ensureMarkedUser(ctx, user, password, marker); err != nil {
		return err
	}
	if err := e.escapeGrants(ctx, dbName); err != nil {
		return err
	}
	privs, err := e.writerPrivs(ctx)
	if err != nil {
		return err
	}
	if readOnly {
		privs = "SELECT, SHOW VIEW"
	} else if ok, err := e.writable(ctx, dbName, owner); err != nil {
		return err
	} else if !ok {
		privs = readOnlyPrivs // over quota: what the owner has now; SetReadOnly gives ALL back to both
	}
	return e.exec(ctx, fmt.Sprintf("GRANT %s ON %s TO %s", privs, onSchema(dbName), mqa(user)))
}

func (e *mysqlEngine) SetPassword(ctx context.Context, dbName, user, password, marker string) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	ok, err := e.credentialUser(ctx, dbName, user, marker)
	if err != nil {
		return err
	}
	if !ok {
		return ErrRoleTaken
	}
	return e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
}

func (e *mysqlEngine) SetUserLogin(ctx context.Context, dbName, user, marker string, enabled bool) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	ok, err := e.credentialUser(ctx, dbName, user, marker)
	if err != nil || !ok {
		return err
	}
	lock := " ACCOUNT LOCK"
	if enabled {
		lock = e.limit + " ACCOUNT UNLOCK"
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER USER %s%s", mqa(user), lock)); err != nil {
		if isMySQLCode(err, 1396) { // dropped meanwhile
			return nil
		}
		return err
	}
	if enabled {
		return nil
	}
	return e.kill(ctx, user)
}

// DropUser implements Engine. As Drop does, it locks the user's account before ending its
// sessions: MariaDB and MySQL do not end the sessions of a user they drop, so a client that
// logged in again between KILL and DROP USER (a pool reconnects at once) kept a session that
// outlived the credential. Repeatable: a retry after a failure in between finds the account
// locked and its sessions ended again.
func (e *mysqlEngine) DropUser(ctx context.Context, dbName, user, marker string) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	exists, err := e.credentialUser(ctx, dbName, user, marker) // never drop a user this credential did not make
	if err != nil {
		return err
	}
	if exists {
		if err := e.exec(ctx, fmt.Sprintf("ALTER USER IF EXISTS %s ACCOUNT LOCK", mqa(user))); err != nil {
			return err
		}
		if err := e.kill(ctx, user); err != nil {
			return err
		}
		if err := e.exec(ctx, fmt.Sprintf("DROP USER IF EXISTS %s", mqa(user))); err != nil {
			return err
		}
	}
	if _, err := e.pool.ExecContext(ctx, "DELETE FROM "+mysqlMarks+" WHERE user_name = ? AND marker = ?", user, marker); err != nil {
		return fmt.Errorf("mysql: unmark user: %w", err)
	}
	return nil
}
