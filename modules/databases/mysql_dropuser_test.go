package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestMySQLDroppedCredentialKeepsNoSession: a client of a MySQL/MariaDB credential reconnects
// in a tight loop (as a pool does when its sessions are ended) while the credential is deleted.
// Once DELETE has answered, none of the sessions it opened is left: MariaDB and MySQL do not end
// the sessions of a user they drop, so the drop must lock the account before it ends them.
//
// The gap between the drop's statements is a round trip, too short for a test to hit for sure,
// so the test widens it: an administrator's session holds a read lock on the table of accounts
// (mysql.global_priv on MariaDB), which makes the drop's first change to an account (ACCOUNT LOCK)
// wait; the test sees it waiting, waits for the looping client to have logged in meanwhile, and
// releases the lock. The sessions are ended after the lock, so the one opened during the wait is
// ended too.
func TestMySQLDroppedCredentialKeepsNoSession(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	ctx := context.Background()
	it, _, _ := ownedDatabase(t, a, "mysql")
	cred := createCredential(t, a, admin, it, "")
	root := enginePool(t, "mysql")

	// The looping client: every login is a new session; the last few are kept open.
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = cred.Username, cred.Password, "tcp", fmt.Sprintf("%s:%d", it.Host, it.Port), it.DatabaseName
	cfg.Timeout = 10 * time.Second
	connector, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	client := sql.OpenDB(connector)
	client.SetMaxIdleConns(0) // a session let go is closed, not reused: every Conn is a new login
	defer client.Close()
	var (
		mu       sync.Mutex
		sessions []*sql.Conn
		logins   int
	)
	stop := make(chan struct{})
	looped := make(chan struct{})
	go func() {
		defer close(looped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c, err := client.Conn(cctx)
			if err == nil {
				err = c.PingContext(cctx)
			}
			cancel()
			if err != nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			mu.Lock()
			sessions = append(sessions, c)
			if len(sessions) > 3 { // a pool's few sessions, not hundreds of them
				sessions[0].Close()
				sessions = sessions[1:]
			}
			logins++
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range sessions {
			c.Close()
		}
	}()
	loginsSoFar := func() int { mu.Lock(); defer mu.Unlock(); return logins }
	require.Eventually(t, func() bool { return loginsSoFar() > 0 }, 30*time.Second, 5*time.Millisecond, "the credential logs in")

	// Hold the table of accounts so that the drop's first change to the account waits.
	accounts := "mysql.user"
	var n int
	require.NoError(t, root.QueryRow("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'mysql' AND table_name = 'global_priv'").Scan(&n))
	if n == 1 {
		accounts = "mysql.global_priv"
	}
	locker, err := root.Conn(ctx)
	require.NoError(t, err)
	defer locker.Close()
	_, err = locker.ExecContext(ctx, "LOCK TABLES "+accounts+" READ")
	require.NoError(t, err)
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			_, err := locker.ExecContext(ctx, "UNLOCK TABLES")
			require.NoError(t, err)
		}
	}
	defer unlock()

	deleted := make(chan *apptest.Resp, 1)
	go func() {
		deleted <- a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", cred.ID), Token: admin})
	}()
	// The drop waits for the lock in a statement naming the credential's account.
	waiting := func() bool {
		var k int
		require.NoError(t, root.QueryRow("SELECT count(*) FROM information_schema.processlist WHERE state LIKE 'Waiting for%lock' AND info LIKE ?",
			"%'"+cred.Username+"'@%").Scan(&k))
		return k > 0
	}
	require.Eventually(t, waiting, 30*time.Second, 5*time.Millisecond, "the drop waits for the table of accounts")
	before := loginsSoFar()
	require.Eventually(t, func() bool { return loginsSoFar() > before }, 10*time.Second, 2*time.Millisecond,
		"the client logs in again while the drop waits")
	unlock()

	var r *apptest.Resp
	select {
	case r = <-deleted:
	case <-time.After(40 * time.Second):
		t.Fatal("DELETE did not answer")
	}
	close(stop)
	<-looped
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.False(t, existsOnEngine(t, "mysql", cred.Username), "the credential's user is gone")

	// KILL ends a session at once, but give the server a moment to let it go: a session never
	// killed stays however long the test waits.
	alive := func() int {
		var k int
		require.NoError(t, root.QueryRow("SELECT count(*) FROM information_schema.processlist WHERE user = ?", cred.Username).Scan(&k))
		return k
	}
	assert.Eventually(t, func() bool { return alive() == 0 }, 30*time.Second, 20*time.Millisecond,
		"no session of the dropped credential is left on the server")
	mu.Lock()
	defer mu.Unlock()
	for i, c := range sessions {
		var one int
		assert.Error(t, c.QueryRowContext(ctx, "SELECT 1").Scan(&one), "the client's session %d of %d was ended", i+1, len(sessions))
	}
}
