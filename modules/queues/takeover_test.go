package queues_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil"
)

// TestTakeoverResetRevokesQueuePasswords: whoever registered an address keeps nothing that works
// once its owner takes the account over by a reset: by the time the reset is answered the revealed
// password no longer logs in, the open connection is closed, and the new password works.
func TestTakeoverResetRevokesQueuePasswords(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	const frontend = "http://frontend.test"
	a := start(t, "", map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port, "Frontend:BaseUrl": frontend})
	eve := a.Register(t)
	r, s := create(t, a, eve.Token, "eve")
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	old := reveal(t, a, eve.Token, s.ID)
	conn, err := amqp.Dial(old.AmqpURL)
	require.NoError(t, err)
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))

	require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": eve.Email}).Status)
	msg := smtp.WaitFor(t, eve.Email, 10*time.Second)
	_, after, found := strings.Cut(msg, frontend+"/auth/reset-password#token=")
	require.True(t, found, msg)
	const newPassword = "the-owner-takes-it-back-1"
	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": strings.Fields(after)[0], "newPassword": newPassword})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))

	_, err = amqp.Dial(old.AmqpURL)
	assert.Error(t, err, "the password revealed before the takeover no longer logs in")
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection opened with the old password stayed open")
	}
	r = a.Post("/api/auth/login", "", map[string]any{"email": eve.Email, "password": newPassword})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var tok struct {
		AccessToken string `json:"accessToken"`
	}
	r.Decode(t, &tok)
	fresh := reveal(t, a, tok.AccessToken, s.ID)
	assert.NotEqual(t, old.Password, fresh.Password)
	c2, err := amqp.Dial(fresh.AmqpURL)
	require.NoError(t, err, "the new password works")
	c2.Close()
}
