package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/platform/idempotency"
	"provisioner/platform/testutil"
)

// keyed sends a request with an Idempotency-Key through a's client.
func keyed(a *apptest.App, method, path, token, key string, body any) *apptest.Resp {
	a.T.Helper()
	return a.Do(apptest.Request{Method: method, Path: path, Token: token, Body: body, Header: map[string]string{"Idempotency-Key": key}})
}

// storedKey is the row of an idempotency key as the control database holds it, as text.
func storedKey(t *testing.T, a *apptest.App, key string) string {
	t.Helper()
	var row string
	require.NoError(t, a.DB.NewRaw("SELECT row_to_json(k)::text FROM idempotency_keys k WHERE key = ?", key).Scan(t.Context(), &row))
	return row
}

// untilAnswered sends a retry until it is no longer refused for the moment (409 while the first
// request runs, 503 while the engines are busy), for up to a minute.
func untilAnswered(t *testing.T, send func() *apptest.Resp) *apptest.Resp {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := send()
		if (r.Status != http.StatusConflict && r.Status != http.StatusServiceUnavailable) || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIdempotencyKeyRetriesOfATimedOutCreateMakeOneDatabase: a client whose create times out sends
// it again, 20 times, with the same key: one database is made, and once the first request is
// answered every retry gets its answer (replayed). A key is per operation and path: the same key
// pausing another database is a 422. An access credential's password, in its kept answer, is
// stored sealed only.
func TestIdempotencyKeyRetriesOfATimedOutCreateMakeOneDatabase(t *testing.T) {
	pg := os.Getenv("TEST_TENANT_PG_URL")
	if pg == "" {
		t.Skip("TEST_TENANT_PG_URL is not set (scripts/test.sh sets it)")
	}
	a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": pg, "Databases:MaxPerUser": 30,
		"RateLimit:PerUser": "100000-M", "RateLimit:PerIp": "100000-M"}))
	u := a.Register(t)
	count := func() int {
		r := a.Get("/api/me/databases", u.Token)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var list []map[string]any
		r.Decode(t, &list)
		return len(list)
	}
	before := count()

	key := "create-" + testutil.RandomSuffix()
	impatient := &http.Client{Timeout: 20 * time.Millisecond}
	timedOut := 0
	for range 20 {
		req, err := http.NewRequest(http.MethodPost, a.URL+"/api/me/databases", strings.NewReader(`{"engine":"postgres"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+u.Token)
		req.Header.Set("Idempotency-Key", key)
		res, err := impatient.Do(req)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			timedOut++
			continue
		}
		require.NoError(t, err)
		res.Body.Close()
		assert.Contains(t, []int{http.StatusCreated, http.StatusConflict}, res.StatusCode, "a retry is answered the first answer, or 409 while it runs")
	}
	t.Logf("%d of 20 attempts timed out", timedOut)
	created := untilAnswered(t, func() *apptest.Resp {
		return keyed(a, http.MethodPost, "/api/me/databases", u.Token, key, map[string]any{"engine": "postgres"})
	})
	assert.Equal(t, before+1, count(), "20 retries of one create make one database")
	require.Equal(t, http.StatusCreated, created.Status, string(created.Raw))
	assert.Equal(t, "true", created.Header.Get("Idempotent-Replayed"))
	var db struct {
		ID int64 `json:"databaseInstanceId"`
	}
	created.Decode(t, &db)

	// The key is bound to its path: pausing another database with it is refused.
	other := a.Post("/api/me/databases", u.Token, map[string]any{"engine": "postgres"})
	require.Equal(t, http.StatusCreated, other.Status, string(other.Raw))
	var odb struct {
		ID int64 `json:"databaseInstanceId"`
	}
	other.Decode(t, &odb)
	pause := "pause-" + testutil.RandomSuffix()
	first := keyed(a, http.MethodPost, fmt.Sprintf("/api/me/databases/%d/pause", db.ID), u.Token, pause, nil)
	require.Equal(t, http.StatusOK, first.Status, string(first.Raw))
	again := keyed(a, http.MethodPost, fmt.Sprintf("/api/me/databases/%d/pause", db.ID), u.Token, pause, nil)
	assert.Equal(t, http.StatusOK, again.Status, "a replayed pause is not a 409 for a database already paused: %s", again.Raw)
	assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, http.StatusUnprocessableEntity,
		keyed(a, http.MethodPost, fmt.Sprintf("/api/me/databases/%d/pause", odb.ID), u.Token, pause, nil).Status)

	// An answer holding a password is kept sealed.
	admin := a.AdminToken(t)
	ck := "cred-" + testutil.RandomSuffix()
	cred := keyed(a, http.MethodPost, "/api/access-credentials", admin, ck, map[string]any{"databaseInstanceId": odb.ID})
	require.Equal(t, http.StatusCreated, cred.Status, string(cred.Raw))
	var cv struct {
		Password string `json:"password"`
	}
	cred.Decode(t, &cv)
	require.NotEmpty(t, cv.Password)
	assert.NotContains(t, storedKey(t, a, ck), cv.Password)
	replayed := keyed(a, http.MethodPost, "/api/access-credentials", admin, ck, map[string]any{"databaseInstanceId": odb.ID})
	assert.Equal(t, string(cred.Raw), string(replayed.Raw), "the replay gives the password again")
}

// TestIdempotencyKeyRacingReplicasMakeOneAiKey: requests with one key sent at once to two replicas
// make one AI key; every 201 carries the same key text, and it is kept sealed, never in clear.
func TestIdempotencyKeyRacingReplicasMakeOneAiKey(t *testing.T) {
	kv := map[string]any{"Redis:KeyPrefix": "idem" + testutil.RandomSuffix(), "RateLimit:PerUser": "100000-M", "RateLimit:PerIp": "100000-M"}
	one := apptest.Start(t, apptest.With(kv))
	two := apptest.Start(t, apptest.With(kv))
	u := one.Register(t)
	key := "race-" + testutil.RandomSuffix()
	body := map[string]any{"name": "race"}

	var mu sync.Mutex
	texts := map[string]int{}
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := one
			if i%2 == 1 {
				a = two
			}
			r := keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, body)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
			if r.Status == http.StatusCreated {
				var k struct{ Key string }
				_ = json.Unmarshal(r.Env.Data, &k)
				texts[k.Key]++
			}
		}()
	}
	wg.Wait()
	for st := range statuses {
		assert.Contains(t, []int{http.StatusCreated, http.StatusConflict}, st, "answers: %v", statuses)
	}
	last := untilAnswered(t, func() *apptest.Resp { return keyed(two, http.MethodPost, "/api/me/ai-keys", u.Token, key, body) })
	r := one.Get("/api/me/ai-keys", u.Token)
	require.Equal(t, http.StatusOK, r.Status)
	var keys []map[string]any
	r.Decode(t, &keys)
	assert.Len(t, keys, 1, "one key made by 17 requests racing on two replicas")
	require.Equal(t, http.StatusCreated, last.Status, string(last.Raw))
	var k struct{ Key string }
	last.Decode(t, &k)
	texts[k.Key]++
	assert.Len(t, texts, 1, "every answer is the first one: %v", statuses)

	row := storedKey(t, one, key)
	for text := range texts {
		require.NotEmpty(t, text)
		assert.NotContains(t, row, text, "the key text is not stored in clear")
		assert.NotContains(t, row, strings.TrimPrefix(text, "sk-prov-"))
	}
	assert.NotContains(t, row, `"race"`, "nor the request")
}

// TestIdempotencyKeySemantics: malformed keys (400), a key in flight (409), the same key with
// another body (422), refused requests not kept, keys per operation, and keys freed when they
// expire or when the request holding them died (its lease lapsed).
func TestIdempotencyKeySemantics(t *testing.T) {
	cf := cloudflaretest.New("zone123", "cf-token", "example.com")
	t.Cleanup(cf.Close)
	a := apptest.Start(t, apptest.With(map[string]any{
		"Dns:BaseUrl": cf.URL, "Dns:ZoneId": "zone123", "Dns:ApiToken": "cf-token", "Dns:ZoneName": "example.com",
		"Dns:DefaultContent": "203.0.113.10", "RateLimit:PerUser": "100000-M", "RateLimit:PerIp": "100000-M",
	}))
	u := a.Register(t)

	t.Run("malformed keys are a 400", func(t *testing.T) {
		for _, k := range []string{"", strings.Repeat("k", 256), "clé", "tab\there"} {
			r := keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, k, map[string]any{"name": "x"})
			assert.Equal(t, http.StatusBadRequest, r.Status, "key %q: %s", k, r.Raw)
			assert.Equal(t, []string{"Idempotency-Key"}, r.Fields())
		}
		req, err := http.NewRequest(http.MethodPost, a.URL+"/api/me/ai-keys", strings.NewReader(`{"name":"x"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+u.Token)
		req.Header.Add("Idempotency-Key", "one")
		req.Header.Add("Idempotency-Key", "two")
		res, err := a.Client.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, "a key given twice")
		assert.Equal(t, http.StatusCreated, keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, strings.Repeat("k", 255), map[string]any{"name": "x"}).Status)
	})

	t.Run("in flight 409, another body 422, then the first answer replayed", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		cf.SetBeforeCreate(func(string) { entered <- struct{}{}; <-release })
		t.Cleanup(func() { cf.SetBeforeCreate(nil) })
		key := "dns-" + testutil.RandomSuffix()
		body := map[string]any{"label": "idem-" + testutil.RandomSuffix()}
		done := make(chan *apptest.Resp)
		go func() { done <- keyed(a, http.MethodPost, "/api/me/dns", u.Token, key, body) }()
		<-entered
		busy := keyed(a, http.MethodPost, "/api/me/dns", u.Token, key, body)
		assert.Equal(t, http.StatusConflict, busy.Status, string(busy.Raw))
		assert.Contains(t, busy.Env.Message, "Idempotency-Key")
		assert.Equal(t, http.StatusUnprocessableEntity, keyed(a, http.MethodPost, "/api/me/dns", u.Token, key, map[string]any{"label": "other"}).Status)
		close(release)
		first := <-done
		require.Equal(t, http.StatusCreated, first.Status, string(first.Raw))
		assert.Empty(t, first.Header.Get("Idempotent-Replayed"))

		// The same request with its members in another order and other white space is the same request.
		again := keyed(a, http.MethodPost, "/api/me/dns", u.Token, key, fmt.Sprintf(` { "label" : %q } `, body["label"]))
		assert.Equal(t, http.StatusCreated, again.Status)
		assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		assert.JSONEq(t, string(first.Raw), string(again.Raw))
		assert.Equal(t, int64(1), cf.Creates(), "one record at the provider")
		assert.Equal(t, http.StatusUnprocessableEntity, keyed(a, http.MethodPost, "/api/me/dns", u.Token, key, map[string]any{"label": "other"}).Status)
		// Keys are per operation: the same key creating an AI key is another request.
		assert.Equal(t, http.StatusCreated, keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, map[string]any{"name": "x"}).Status)
		// And per user: another user's key of the same text is theirs.
		v := a.Register(t)
		assert.Equal(t, http.StatusCreated, keyed(a, http.MethodPost, "/api/me/ai-keys", v.Token, key, map[string]any{"name": "x"}).Status)
	})

	t.Run("a refusal is not kept", func(t *testing.T) {
		key := "refused-" + testutil.RandomSuffix()
		bad := keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, map[string]any{"name": " "})
		require.Equal(t, http.StatusBadRequest, bad.Status, string(bad.Raw))
		ok := keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, map[string]any{"name": "fixed"})
		assert.Equal(t, http.StatusCreated, ok.Status, string(ok.Raw))
		assert.Empty(t, ok.Header.Get("Idempotent-Replayed"))
	})

	t.Run("a rotation replayed rotates once", func(t *testing.T) {
		made := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "rot"})
		require.Equal(t, http.StatusCreated, made.Status)
		var k struct{ ID int64 }
		made.Decode(t, &k)
		key := "rotate-" + testutil.RandomSuffix()
		path := fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID)
		r1 := keyed(a, http.MethodPost, path, u.Token, key, nil)
		r2 := keyed(a, http.MethodPost, path, u.Token, key, nil)
		require.Equal(t, http.StatusOK, r1.Status, string(r1.Raw))
		assert.Equal(t, string(r1.Raw), string(r2.Raw))
		var events int
		require.NoError(t, a.DB.NewRaw("SELECT count(*) FROM audit_events WHERE action = 'aikey.rotated' AND target_id = ?",
			fmt.Sprint(k.ID)).Scan(t.Context(), &events))
		assert.Equal(t, 1, events, "one rotation")
	})

	t.Run("an expired key and a dead request's key are free again", func(t *testing.T) {
		key := "expiry-" + testutil.RandomSuffix()
		require.Equal(t, http.StatusCreated, keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, map[string]any{"name": "a"}).Status)
		_, err := a.DB.NewRaw("UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = ?", key).Exec(t.Context())
		require.NoError(t, err)
		r := keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, map[string]any{"name": "b"})
		assert.Equal(t, http.StatusCreated, r.Status, "after 24 hours the key is new: %s", r.Raw)
		assert.Empty(t, r.Header.Get("Idempotent-Replayed"))

		// The request answering it died (its process stopped): its lease runs out, then a retry runs.
		_, err = a.DB.NewRaw("UPDATE idempotency_keys SET status = NULL, answer = NULL, owner = gen_random_uuid(), "+
			"lease_until = now() + interval '1 hour' WHERE key = ?", key).Exec(t.Context())
		require.NoError(t, err)
		assert.Equal(t, http.StatusConflict, keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, map[string]any{"name": "b"}).Status)
		_, err = a.DB.NewRaw("UPDATE idempotency_keys SET lease_until = now() - interval '1 second' WHERE key = ?", key).Exec(t.Context())
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnprocessableEntity, keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, map[string]any{"name": "c"}).Status,
			"another request may not take the key over")
		r = keyed(a, http.MethodPost, "/api/me/ai-keys", u.Token, key, map[string]any{"name": "b"})
		assert.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		assert.Empty(t, r.Header.Get("Idempotent-Replayed"), "run again")
		assert.True(t, bytes.Contains([]byte(storedKey(t, a, key)), []byte(`"status":201`)))
	})
}

// TestExpiredKeysAreSweptWithoutNewClaims: the kept answers of expired keys (1,200 of them, more
// than one batch) are deleted by the store's sweeps on their own, with no request taking a new key;
// a key not expired yet is kept.
func TestExpiredKeysAreSweptWithoutNewClaims(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	_, err := a.DB.Exec(`INSERT INTO idempotency_keys (user_id, operation, key, request, status, answer, expires_at)
		SELECT ?, 'createMyAiKey', 'expired-' || g, 'sealed', 201, 'sealed answer', now() - interval '1 second'
		FROM generate_series(1, 1200) g`, u.ID)
	require.NoError(t, err)
	_, err = a.DB.Exec(`INSERT INTO idempotency_keys (user_id, operation, key, request, status, answer, expires_at)
		VALUES (?, 'createMyAiKey', 'live', 'sealed', 201, 'sealed answer', now() + interval '1 hour')`, u.ID)
	require.NoError(t, err)

	st := idempotency.New(a.DB, nil, idempotency.Options{SweepEvery: 50 * time.Millisecond})
	st.Start()
	defer st.Stop()
	count := func(like string) int {
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM idempotency_keys WHERE user_id = ? AND key LIKE ?", u.ID, like).Scan(&n))
		return n
	}
	assert.Eventually(t, func() bool { return count("expired-%") == 0 }, 30*time.Second, 50*time.Millisecond, "every expired key swept")
	assert.Equal(t, 1, count("live"), "the key not expired is kept")
}
