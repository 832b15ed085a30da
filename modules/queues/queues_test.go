package queues_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/queues/queuestest"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

type space struct {
	ID             int64  `json:"id"`
	Name           string `json:"name"`
	VHost          string `json:"vhost"`
	Username       string `json:"username"`
	AmqpURL        string `json:"amqpUrl"`
	Status         string `json:"status"`
	ErrorMessage   string `json:"errorMessage"`
	MaxConnections int    `json:"maxConnections"`
	MaxQueues      int    `json:"maxQueues"`
}

type credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
	AmqpURL  string `json:"amqpUrl"`
}

// start runs the app against the real broker (or base, a proxy in front of it), with kv on top.
func start(t *testing.T, base string, kv map[string]any) *apptest.App {
	t.Helper()
	cfg := queuestest.Settings(base)
	cfg["RateLimit:Register"] = "1000-M"
	cfg["RateLimit:PasswordReveal"] = "1000-M"
	for k, v := range kv {
		cfg[k] = v
	}
	return apptest.Start(t, apptest.With(cfg))
}

// create asks for a queue space; the broker keeps nothing of it once the test ends.
func create(t *testing.T, a *apptest.App, token, name string) (*apptest.Resp, space) {
	t.Helper()
	r := a.Post("/api/me/queues", token, map[string]any{"name": name})
	var s space
	if r.Env.Data != nil {
		r.Decode(t, &s)
	}
	if s.VHost != "" {
		t.Cleanup(func() {
			queuestest.Call(t, http.MethodDelete, "/api/users/"+s.Username)
			queuestest.Call(t, http.MethodDelete, "/api/vhosts/"+s.VHost)
		})
	}
	return r, s
}

func reveal(t *testing.T, a *apptest.App, token string, id int64) credentials {
	t.Helper()
	r := a.Get(fmt.Sprintf("/api/me/queues/%d/password", id), token)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var c credentials
	r.Decode(t, &c)
	return c
}

// TestTenantUsesItsQueueSpace: a tenant connects over AMQP with the revealed password, declares a
// queue, publishes and consumes; it is refused in another tenant's virtual host; once its space is
// deleted its login is refused at once and its open connection is closed.
func TestTenantUsesItsQueueSpace(t *testing.T) {
	a := start(t, "", nil)
	u := a.Register(t)
	r, s := create(t, a, u.Token, "orders")
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.Equal(t, "Active", s.Status)
	assert.Equal(t, "orders", s.Name)
	assert.Regexp(t, `^qs-[0-9a-f]{20}$`, s.VHost, "generated, never user text")
	assert.Regexp(t, `^qu-[0-9a-f]{20}$`, s.Username)
	assert.Equal(t, fmt.Sprintf("amqp://%s@127.0.0.1:5672/%s", s.Username, s.VHost), s.AmqpURL, "no password in the item")
	assert.Equal(t, 20, s.MaxConnections)
	assert.Equal(t, 100, s.MaxQueues)

	c := reveal(t, a, u.Token, s.ID)
	require.Len(t, c.Password, 32)
	conn, err := amqp.Dial(c.AmqpURL)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	q, err := ch.QueueDeclare("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Publish("", q.Name, false, false, amqp.Publishing{Body: []byte("hello")}))
	msgs, err := ch.Consume(q.Name, "", true, false, false, false, nil)
	require.NoError(t, err)
	select {
	case m := <-msgs:
		assert.Equal(t, "hello", string(m.Body))
	case <-time.After(10 * time.Second):
		t.Fatal("the message published was not consumed")
	}

	// Another tenant, with a space of its own, cannot open this one.
	v := a.Register(t)
	r, other := create(t, a, v.Token, "billing")
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	oc := reveal(t, a, v.Token, other.ID)
	_, err = amqp.Dial(fmt.Sprintf("amqp://%s:%s@127.0.0.1:5672/%s", oc.Username, oc.Password, s.VHost))
	require.Error(t, err, "refused in another tenant's virtual host")
	// Nor see the other's space through the API.
	assert.Equal(t, http.StatusNotFound, a.Get(fmt.Sprintf("/api/me/queues/%d/password", s.ID), v.Token).Status)
	assert.Equal(t, http.StatusNotFound, a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/queues/%d", s.ID), Token: v.Token}).Status)

	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/queues/%d", s.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	_, err = amqp.Dial(c.AmqpURL)
	require.Error(t, err, "a deleted space refuses logins at once")
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the open connection of a deleted space was not closed")
	}
	assert.False(t, queuestest.VHostExists(t, s.VHost))
	assert.False(t, queuestest.UserExists(t, s.Username))
	var list []space
	a.Get("/api/me/queues", u.Token).Decode(t, &list)
	assert.Empty(t, list, "a deleted space is not listed")
	assert.Equal(t, http.StatusNotFound, a.Get(fmt.Sprintf("/api/me/queues/%d/password", s.ID), u.Token).Status)
}

// TestQuotaDashboardAndDeletedUser: Queues:MaxPerUser spaces, then 409; the dashboard and the
// platform metrics count them; deleting the user deletes them at the broker.
func TestQuotaDashboardAndDeletedUser(t *testing.T) {
	a := start(t, "", nil)
	u := a.Register(t)
	var spaces []space
	for _, name := range []string{"one", "two"} {
		r, s := create(t, a, u.Token, name)
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		spaces = append(spaces, s)
	}
	r, _ := create(t, a, u.Token, "three")
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	assert.Contains(t, r.Env.Message, "Queues:MaxPerUser")
	for _, bad := range []any{"", "   ", "a/b", map[string]any{}} {
		body := map[string]any{"name": bad}
		if m, ok := bad.(map[string]any); ok {
			body = m
		}
		assert.Equal(t, http.StatusBadRequest, a.Post("/api/me/queues", u.Token, body).Status, "%v", bad)
	}

	admin := a.AdminToken(t)
	var dash struct {
		Sections map[string][]space `json:"sections"`
		Totals   map[string]int     `json:"totals"`
	}
	a.Get("/api/users/"+strconv.FormatInt(u.ID, 10)+"/dashboard", admin).Decode(t, &dash)
	assert.Len(t, dash.Sections["queueSpaces"], 2)
	assert.Equal(t, 2, dash.Totals["queueSpaces"])
	var metrics struct {
		Other map[string]int64 `json:"other"`
	}
	a.Get("/api/metrics/platform", "").Decode(t, &metrics)
	assert.GreaterOrEqual(t, metrics.Other["queueSpaces"], int64(2))

	require.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/users/" + strconv.FormatInt(u.ID, 10), Token: admin}).Status)
	a.Settle(20 * time.Second)
	for _, s := range spaces {
		var status string
		require.NoError(t, a.DB.QueryRow("SELECT status FROM queue_spaces WHERE id = ?", s.ID).Scan(&status))
		assert.Equal(t, "Deleted", status)
		assert.False(t, queuestest.VHostExists(t, s.VHost), "a deleted user's space is deleted at the broker")
		assert.False(t, queuestest.UserExists(t, s.Username))
	}
}

// TestUnconfigured: without Queues:ManagementUrl the routes that call the broker answer 503
// naming the key; nothing is stored.
func TestUnconfigured(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Register": "1000-M"}))
	u := a.Register(t)
	r := a.Post("/api/me/queues", u.Token, map[string]any{"name": "orders"})
	require.Equal(t, http.StatusServiceUnavailable, r.Status, string(r.Raw))
	assert.Contains(t, r.Env.Message, "Queues:ManagementUrl")
	admin := a.AdminToken(t)
	r = a.Post("/api/queues", admin, map[string]any{"userId": u.ID, "name": "orders"})
	assert.Equal(t, http.StatusServiceUnavailable, r.Status, string(r.Raw))
	r = a.Get("/api/me/queues", u.Token)
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/me/queues/987654321", Token: u.Token})
	assert.Equal(t, http.StatusNotFound, r.Status, "not the caller's: 404 before 503; %s", r.Raw)
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM queue_spaces WHERE user_id = ?", u.ID).Scan(&n))
	assert.Zero(t, n)
}
