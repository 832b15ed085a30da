package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/testutil"
)

type credView struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Status   string `json:"status"`
	Password string `json:"password"`
}

// leftCredential stores, as a crashed request would have left it, a credential row of it in
// status (its next attempt not due yet, as the request stores it) and returns its id.
func leftCredential(t *testing.T, a *apptest.App, it item, username, status string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, a.DB.QueryRow(`INSERT INTO access_credentials (database_instance_id, username, password_sealed, status, next_attempt_at)
		VALUES (?, ?, 'sealed', ?, now() + interval '1 minute') RETURNING id`, it.ID, username, status).Scan(&id))
	return id
}

// credentialMarker is the mark the role of credential id carries on its engine.
func credentialMarker(t *testing.T, a *apptest.App, id int64) string {
	t.Helper()
	var token sql.NullString
	require.NoError(t, a.DB.QueryRow("SELECT marker_token FROM access_credentials WHERE id = ?", id).Scan(&token))
	return databases.CredentialMarker(id, token.String)
}

// finishCredentials makes the given credentials due (their request is long gone), lets the
// finisher run, and returns their stored statuses.
func finishCredentials(t *testing.T, a *apptest.App, ids ...int64) []string {
	t.Helper()
	for _, id := range ids {
		_, err := a.DB.Exec("UPDATE access_credentials SET next_attempt_at = now() WHERE id = ?", id)
		require.NoError(t, err)
	}
	a.Settle(10 * time.Second)
	out := make([]string, len(ids))
	for i, id := range ids {
		require.NoError(t, a.DB.QueryRow("SELECT status FROM access_credentials WHERE id = ?", id).Scan(&out[i]))
	}
	return out
}

func getCredential(t *testing.T, a *apptest.App, admin string, id int64) (int, credView) {
	t.Helper()
	r := a.Get(fmt.Sprintf("/api/access-credentials/%d", id), admin)
	var v credView
	if r.Status == http.StatusOK {
		r.Decode(t, &v)
	}
	return r.Status, v
}

func listCredentials(t *testing.T, a *apptest.App, admin string, it item) map[int64]string {
	t.Helper()
	r := a.Get(fmt.Sprintf("/api/access-credentials?databaseInstanceId=%d", it.ID), admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var page struct {
		Items []credView `json:"items"`
	}
	r.Decode(t, &page)
	out := map[int64]string{}
	for _, c := range page.Items {
		out[c.ID] = c.Status
	}
	return out
}

func createCredential(t *testing.T, a *apptest.App, admin string, it item, username string) credView {
	t.Helper()
	body := map[string]any{"databaseInstanceId": it.ID}
	if username != "" {
		body["username"] = username
	}
	r := a.Post("/api/access-credentials", admin, body)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var v credView
	r.Decode(t, &v)
	return v
}

// TestCrashedCredentialCreateIsUndone: a credential left Creating by a crash (the client never
// got its password, which is shown once) is undone by the finisher: the role the crashed request
// made (carrying this credential's mark) is dropped, a row whose request died before the engine
// ends the same, and a role of that name the credential did not make is left alone. Until then
// the API shows it Creating; afterwards it answers 404 and the same username can be created
// again. A Creating row whose request may still be at work (not due yet) is left alone.
func TestCrashedCredentialCreateIsUndone(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			it, rv, _ := ownedDatabase(t, a, engine)
			e := engines.Get(engine)

			made := it.DatabaseName + "_made"
			madeID := leftCredential(t, a, it, made, "Creating")
			require.NoError(t, e.CreateUser(ctx, it.DatabaseName, it.DatabaseUser, made, "Made-pw-1234567890", false, credentialMarker(t, a, madeID)))
			_, err := connect(t, engine, it, made, "Made-pw-1234567890")
			require.NoError(t, err, "the crashed request's role logs in")

			never := it.DatabaseName + "_never"
			neverID := leftCredential(t, a, it, never, "Creating")

			stranger, strangerPw := "stranger_"+testutil.RandomSuffix(), "Stranger-pw-"+testutil.RandomSuffix()
			strangerRole(t, engine, stranger, strangerPw)
			strangerID := leftCredential(t, a, it, stranger, "Creating")

			code, v := getCredential(t, a, admin, madeID)
			require.Equal(t, http.StatusOK, code)
			assert.Equal(t, "Creating", v.Status)
			r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/access-credentials/%d", madeID), Token: admin,
				Body: map[string]any{"rotatePassword": true}})
			assert.Equal(t, http.StatusConflict, r.Status, "a Creating credential is not rotated: %s", r.Raw)

			// Not due yet: its request may still be at work.
			a.Settle(5 * time.Second)
			code, v = getCredential(t, a, admin, madeID)
			require.Equal(t, http.StatusOK, code)
			assert.Equal(t, "Creating", v.Status, "a create that may still be in progress is left alone")
			assert.True(t, existsOnEngine(t, engine, made))

			assert.Equal(t, []string{"Deleted", "Deleted", "Deleted"}, finishCredentials(t, a, madeID, neverID, strangerID))
			assert.False(t, existsOnEngine(t, engine, made), "the role the crashed request made is dropped")
			assert.False(t, existsOnEngine(t, engine, never))
			for _, id := range []int64{madeID, neverID, strangerID} {
				code, _ := getCredential(t, a, admin, id)
				assert.Equal(t, http.StatusNotFound, code)
			}
			assert.Empty(t, listCredentials(t, a, admin, it))

			err = connectAsStranger(t, engine, it, stranger, strangerPw)
			assert.NoError(t, err, "a role of that name the credential did not make is left alone")
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.NoError(t, err, "the owner is untouched")

			again := createCredential(t, a, admin, it, made)
			_, err = connect(t, engine, it, made, again.Password)
			assert.NoError(t, err, "the same username is created again")
		})
	}
}

// TestCredentialDeleteIsFinished: a delete is stored as intent (Deleting) before the engine is
// asked. When the engine is down the answer is 502 with the credential Deleting, listed as such
// and no longer rotatable; when the process died after storing the intent, the row is Deleting
// too; a create the engine could not answer (it may have made the role) ends Deleting as well.
// The finisher drops the roles of all three once the engine answers, and the API then answers
// 404.
func TestCredentialDeleteIsFinished(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	admin := a.AdminToken(t)
	// A replica whose engines are unreachable, on the same control database.
	down := apptest.Start(t, apptest.With(map[string]any{
		"ConnectionStrings:TenantPostgres": "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		"ConnectionStrings:TenantMysql":    "root@tcp(127.0.0.1:1)/?timeout=2s",
	}))
	downAdmin := down.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			it, _, _ := ownedDatabase(t, a, engine)

			failed := createCredential(t, a, admin, it, "")
			r := down.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", failed.ID), Token: downAdmin})
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			assertTriedAgainIn(t, r, "credential delete")
			assert.Contains(t, string(r.Raw), `"status":"Deleting"`)
			assert.NotContains(t, string(r.Raw), failed.Password)

			// A create the engine could not answer: whether it made the role is unknown.
			r = down.Post("/api/access-credentials", downAdmin, map[string]any{"databaseInstanceId": it.ID})
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			assert.Empty(t, r.Header.Get("Retry-After"), "the create is undone, not pending: nothing to wait for")
			var refusedID int64
			var refused string
			require.NoError(t, a.DB.QueryRow("SELECT id, username FROM access_credentials WHERE database_instance_id = ? AND id > ?",
				it.ID, failed.ID).Scan(&refusedID, &refused))

			crashed := createCredential(t, a, admin, it, "")
			_, err := a.DB.Exec("UPDATE access_credentials SET status = 'Deleting', next_attempt_at = now() + interval '1 minute' WHERE id = ?", crashed.ID)
			require.NoError(t, err)

			assert.Equal(t, map[int64]string{failed.ID: "Deleting", refusedID: "Deleting", crashed.ID: "Deleting"}, listCredentials(t, a, admin, it),
				"none is listed as usable")
			r = a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/access-credentials/%d", failed.ID), Token: admin,
				Body: map[string]any{"rotatePassword": true}})
			assert.Equal(t, http.StatusConflict, r.Status, "a Deleting credential is not rotated: %s", r.Raw)
			assert.True(t, existsOnEngine(t, engine, failed.Username))
			assert.True(t, existsOnEngine(t, engine, crashed.Username))

			assert.Equal(t, []string{"Deleted", "Deleted", "Deleted"}, finishCredentials(t, a, failed.ID, refusedID, crashed.ID))
			for _, c := range []credView{failed, crashed} {
				assert.False(t, existsOnEngine(t, engine, c.Username), "the finisher dropped %s", c.Username)
				_, err = connect(t, engine, it, c.Username, c.Password)
				assert.Error(t, err)
				code, _ := getCredential(t, a, admin, c.ID)
				assert.Equal(t, http.StatusNotFound, code)
			}
			assert.Empty(t, listCredentials(t, a, admin, it))
			again := createCredential(t, a, admin, it, refused)
			_, err = connect(t, engine, it, again.Username, again.Password)
			assert.NoError(t, err, "the refused create's username is free again")
			var audited int
			require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'access_credential.deleted' AND target_id = ?",
				fmt.Sprint(failed.ID)).Scan(&audited))
			assert.Equal(t, 1, audited, "the delete is audited once, when asked")
		})
	}
}

// TestCredentialCreatesWhileTheFinisherRuns: with the background finisher polling every 100 ms,
// concurrent creates through the API each answer 201 with a password that logs in, and each
// credential stays Active: the finisher never undoes a create whose request is at work.
func TestCredentialCreatesWhileTheFinisherRuns(t *testing.T) {
	a := start(t, nil, apptest.WithFinisher())
	admin := a.AdminToken(t)
	it, _, _ := ownedDatabase(t, a, "postgres")
	var wg sync.WaitGroup
	answers := make([]*apptest.Resp, 6)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID})
		}()
	}
	wg.Wait()
	made := make([]credView, len(answers))
	for i, r := range answers {
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		r.Decode(t, &made[i])
	}
	time.Sleep(300 * time.Millisecond) // a few more polls
	listed := listCredentials(t, a, admin, it)
	for _, c := range made {
		assert.Equal(t, "Active", listed[c.ID])
		_, err := connect(t, "postgres", it, c.Username, c.Password)
		assert.NoError(t, err, "%s logs in", c.Username)
	}
}
