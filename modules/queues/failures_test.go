package queues_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/queues"
	"provisioner/modules/queues/queuestest"
	"provisioner/platform/provision/provisiontest"
	"provisioner/platform/secrets"
	"provisioner/platform/testutil"
)

// statusOf reads a space's status and error as stored.
func statusOf(t *testing.T, a *apptest.App, id int64) (status, lastErr, errMsg string) {
	t.Helper()
	require.NoError(t, a.DB.QueryRow("SELECT status, last_error, error_message FROM queue_spaces WHERE id = ?", id).Scan(&status, &lastErr, &errMsg))
	return
}

// finish runs the finisher with every row due (no waiting out the backoff) until the space is
// no longer Provisioning or rounds are spent.
func finish(t *testing.T, a *apptest.App, id int64, rounds int) string {
	t.Helper()
	for i := 0; i < rounds; i++ {
		if s, _, _ := statusOf(t, a, id); s != "Provisioning" && s != "Deleting" {
			return s
		}
		_, err := a.DB.Exec("UPDATE queue_spaces SET next_attempt_at = now() WHERE id = ?", id)
		require.NoError(t, err)
		a.Finisher.RunOnce(context.Background())
	}
	s, _, _ := statusOf(t, a, id)
	return s
}

func description(s space, userID int64) string {
	return fmt.Sprintf("provisioner queue space %d of user %d", s.ID, userID)
}

// TestBrokerFailuresEndActiveWithOneVHost: the management API answers every other call with a
// failure (a 500 before or after acting, a timeout, a garbled 200, a 404 page that is not the
// API's); the space is retried in the background and ends Active with one virtual host, which
// the tenant can use.
func TestBrokerFailuresEndActiveWithOneVHost(t *testing.T) {
	p := queuestest.NewProxy(t)
	a := start(t, p.URL, map[string]any{"Finisher:MaxAttempts": 30})
	u := a.Register(t)
	faults := []queuestest.Fault{queuestest.Fail500, queuestest.After500, queuestest.Hang, queuestest.GarbledAfter, queuestest.NotJSON404}
	p.Script(func(n int, _ *http.Request) queuestest.Fault {
		if n%2 == 1 && n < 30 {
			return faults[(n/2)%len(faults)]
		}
		return queuestest.Pass
	})
	r, s := create(t, a, u.Token, "flaky")
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Equal(t, "Provisioning", s.Status)
	assert.NotEmpty(t, s.ErrorMessage)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))

	require.Equal(t, "Active", finish(t, a, s.ID, 40))
	assert.GreaterOrEqual(t, p.Calls(), 20, "the script's failures were met")
	assert.Equal(t, 1, queuestest.VHostsDescribed(t, description(s, u.ID)), "one virtual host")
	c := reveal(t, a, u.Token, s.ID)
	conn, err := amqp.Dial(c.AmqpURL)
	require.NoError(t, err)
	conn.Close()
}

// TestBrokerFailingThroughoutEndsFailedWithNothingLeft: every call that changes something reaches
// the broker but its answer is lost (500); the attempts run out, the space is Failed, and once the
// management API recovers nothing of it is left at the broker. A definitive refusal (a 400) is
// Failed at once with the broker's words, with nothing left either.
func TestBrokerFailingThroughoutEndsFailedWithNothingLeft(t *testing.T) {
	p := queuestest.NewProxy(t)
	a := start(t, p.URL, map[string]any{"Finisher:MaxAttempts": 3})
	u := a.Register(t)
	p.Script(func(_ int, r *http.Request) queuestest.Fault {
		if r.Method == http.MethodGet {
			return queuestest.Pass
		}
		return queuestest.After500
	})
	r, s := create(t, a, u.Token, "doomed")
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	require.Equal(t, "Failed", finish(t, a, s.ID, 10))
	_, _, msg := statusOf(t, a, s.ID)
	assert.Contains(t, msg, "500")
	assert.True(t, queuestest.VHostExists(t, s.VHost), "the lost answers' work is at the broker while it fails")

	// Still failing: the sweep is retried; recovered: it removes everything.
	a.Settle(2 * time.Second)
	p.Script(nil)
	for i := 0; i < 10 && (queuestest.VHostExists(t, s.VHost) || queuestest.UserExists(t, s.Username)); i++ {
		_, err := a.DB.Exec("UPDATE queue_space_sweeps SET next_attempt_at = now()")
		require.NoError(t, err)
		a.Finisher.RunOnce(context.Background())
	}
	assert.False(t, queuestest.VHostExists(t, s.VHost), "nothing left at the broker")
	assert.False(t, queuestest.UserExists(t, s.Username))
	st, _, _ := statusOf(t, a, s.ID)
	assert.Equal(t, "Failed", st)

	// A refusal: Failed at once, with the broker's words; what the attempt made is removed.
	p.Script(func(_ int, r *http.Request) queuestest.Fault {
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/users/") {
			return queuestest.Refuse400
		}
		return queuestest.Pass
	})
	v := a.Register(t)
	r, s = create(t, a, v.Token, "refused")
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Equal(t, "Failed", s.Status)
	assert.Contains(t, s.ErrorMessage, "refused by the test")
	assert.Empty(t, r.Header.Get("Retry-After"))
	assert.False(t, queuestest.VHostExists(t, s.VHost), "the virtual host made before the refusal is removed")

	// An administrator's retry once the broker accepts: Active.
	p.Script(nil)
	admin := a.AdminToken(t)
	r = a.Post(fmt.Sprintf("/api/queues/%d/retry", s.ID), admin, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var again space
	r.Decode(t, &again)
	assert.Equal(t, "Active", again.Status)
	a.Settle(2 * time.Second) // a sweep of the earlier failure leaves the live space alone
	assert.True(t, queuestest.VHostExists(t, s.VHost))
}

// TestLifecycleSuite: the shared provisioner suite against the real broker.
func TestLifecycleSuite(t *testing.T) {
	var sealer *secrets.Sealer
	app := apptest.Start(t, apptest.With(queuestest.Settings("")), apptest.WithFx(fx.Populate(&sealer)))
	prov := app.Finisher.Provisioner(queues.Kind)
	require.NotNil(t, prov)
	names := map[int64][2]string{}
	provisiontest.Run(t, provisiontest.Harness{
		DB: app.DB, Provisioner: prov, Created: "Active", Deleted: "Deleted",
		Status: func(t *testing.T, id int64) string { s, _, _ := statusOf(t, app, id); return s },
		NewRow: func(t *testing.T) int64 {
			u := app.Register(t)
			tok := testutil.RandomSuffix()
			vhost, user := "qs-suite-"+tok, "qu-suite-"+tok
			sealed, err := sealer.Seal([]byte(secrets.RandomPassword()), "queues:"+user)
			require.NoError(t, err)
			var id int64
			require.NoError(t, app.DB.QueryRow(`INSERT INTO queue_spaces (user_id, name, vhost, username, password_sealed, status, max_connections, max_queues)
				VALUES (?, 'suite', ?, ?, ?, 'Provisioning', 5, 5) RETURNING id`, u.ID, vhost, user, sealed).Scan(&id))
			names[id] = [2]string{vhost, user}
			t.Cleanup(func() {
				queuestest.Call(t, http.MethodDelete, "/api/users/"+user)
				queuestest.Call(t, http.MethodDelete, "/api/vhosts/"+vhost)
			})
			return id
		},
		MarkDeleting: func(t *testing.T, id int64) {
			_, err := app.DB.Exec("UPDATE queue_spaces SET status = 'Deleting' WHERE id = ?", id)
			require.NoError(t, err)
		},
		External: func(t *testing.T, id int64) int {
			v, u := queuestest.VHostExists(t, names[id][0]), queuestest.UserExists(t, names[id][1])
			switch {
			case v && u:
				return 1
			case !v && !u:
				return 0
			}
			return 2 // half a space
		},
	})
}

// TestBrokerRetryAfterHoldsTheSpaceBack: the management API answers busy (503) asking for two
// minutes: the create is a 502 whose Retry-After is at least that, the space stays Provisioning
// with the broker's words cut short, and the finisher leaves it alone until then.
func TestBrokerRetryAfterHoldsTheSpaceBack(t *testing.T) {
	p := queuestest.NewProxy(t)
	a := start(t, p.URL, nil)
	u := a.Register(t)
	p.Script(func(_ int, r *http.Request) queuestest.Fault {
		if r.Method == http.MethodPut {
			return queuestest.Busy503
		}
		return queuestest.Pass
	})
	r, s := create(t, a, u.Token, "busy")
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Equal(t, "Provisioning", s.Status)
	wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
	assert.GreaterOrEqual(t, wait, 110, "at least the broker's 120 s, less the time since")
	assert.Contains(t, s.ErrorMessage, "503")
	assert.Less(t, len(s.ErrorMessage), 400, "the broker's 5,000-character reason cut short")

	calls := p.Calls()
	a.Finisher.RunOnce(context.Background())
	assert.Equal(t, calls, p.Calls(), "no call before the broker's time")
	var due time.Time
	require.NoError(t, a.DB.QueryRow("SELECT next_attempt_at FROM queue_spaces WHERE id = ?", s.ID).Scan(&due))
	assert.Greater(t, time.Until(due), 100*time.Second)
}
