package outbound_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/outbound"
)

const token = "tok-9f8e7d6c5b4a39281706f5e4d3c2b1a0"

// provider is a fake provider answering each call with the next of its answers (the last one
// repeated), recording what it was sent.
type provider struct {
	*httptest.Server
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	got     []*http.Request
	bodies  []string
}

func newProvider(t *testing.T, answers ...func(w http.ResponseWriter)) *provider {
	p := &provider{answers: answers}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		i := min(len(p.got), len(p.answers)-1)
		p.got, p.bodies = append(p.got, r), append(p.bodies, string(body))
		p.mu.Unlock()
		p.answers[i](w)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *provider) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

func status(code int, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"code":` + http.StatusText(code) + `}`))
	}
}

// TestJSONCall: the body is the request's JSON, sent with the credentials and JSON headers; the
// answer comes back whatever its status.
func TestJSONCall(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"r1"}`))
	})
	c := outbound.New(outbound.Options{Name: "test provider", BaseURL: p.URL + "/", Bearer: token, Accept: "application/json"})
	res, err := c.Do(context.Background(), outbound.Request{Method: http.MethodPost, Path: "/things",
		JSON: map[string]int{"n": 1}, Header: http.Header{"Idempotency-Key": {"k1"}}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, res.Status)
	assert.True(t, res.OK())
	assert.JSONEq(t, `{"id":"r1"}`, string(res.Body))
	r := p.got[0]
	assert.Equal(t, "/things", r.URL.Path)
	assert.JSONEq(t, `{"n":1}`, p.bodies[0])
	assert.Equal(t, "Bearer "+token, r.Header.Get("Authorization"))
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, "application/json", r.Header.Get("Accept"))
	assert.Equal(t, "k1", r.Header.Get("Idempotency-Key"))

	// A body sent as it is, and basic authentication.
	b := outbound.New(outbound.Options{BaseURL: p.URL, User: "admin", Password: "s3cret"})
	_, err = b.Do(context.Background(), outbound.Request{Method: http.MethodPut, Path: "/x", Body: []byte(`[1]`)})
	require.NoError(t, err)
	user, pass, ok := p.got[1].BasicAuth()
	assert.True(t, ok)
	assert.Equal(t, "admin", user)
	assert.Equal(t, "s3cret", pass)
	assert.Equal(t, `[1]`, p.bodies[1])

	// Without a body, no Content-Type.
	_, err = b.Do(context.Background(), outbound.Request{Method: http.MethodGet, Path: "/x"})
	require.NoError(t, err)
	assert.Empty(t, p.got[2].Header.Get("Content-Type"))
	assert.Empty(t, p.got[2].Header.Get("Accept"), "no Accept unless Options.Accept")
	assert.Empty(t, p.bodies[2])
}

// TestRedirectNotFollowed: a redirect is answered as it is (retryable), never followed: a DELETE
// turned into a GET of another address would pass for a deletion.
func TestRedirectNotFollowed(t *testing.T) {
	other := newProvider(t, status(http.StatusOK))
	p := newProvider(t, status(http.StatusFound, "Location", other.URL+"/elsewhere"))
	c := outbound.New(outbound.Options{BaseURL: p.URL, HTTP: &http.Client{}})
	res, err := c.Do(context.Background(), outbound.Request{Method: http.MethodDelete, Path: "/x"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusFound, res.Status)
	assert.True(t, outbound.Retryable(res.Status))
	assert.Zero(t, other.calls(), "the redirect was not followed")
}

// TestRetriesWithinTheCall: a 503, then a 429 with Retry-After: 1, then a success: three tries in
// one call. Under NoWait, the 429 is returned as it is. A Retry-After above MaxRetryWait ends the
// call with that answer; a refusal is not tried again.
func TestRetriesWithinTheCall(t *testing.T) {
	answers := []func(http.ResponseWriter){status(503), status(429, "Retry-After", "1"), status(200)}
	p := newProvider(t, answers...)
	budget := 0
	c := outbound.New(outbound.Options{BaseURL: p.URL, Retries: 2, Budget: func(context.Context) error { budget++; return nil }})
	res, err := c.Do(context.Background(), outbound.Request{Method: http.MethodPost, Path: "/x", JSON: 1})
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, 3, p.calls())
	assert.Equal(t, 3, budget, "the budget is asked before every try")
	assert.Equal(t, []string{"1", "1", "1"}, p.bodies, "every try sends the body")

	now := newProvider(t, answers...)
	c = outbound.New(outbound.Options{BaseURL: now.URL, Retries: 2})
	res, err = c.Do(outbound.NoWait(context.Background()), outbound.Request{Method: http.MethodPost, Path: "/x"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, res.Status, "under NoWait a Retry-After ends the call: the caller retries later")
	assert.Equal(t, 2, now.calls(), "the 503 was tried again at once")

	long := newProvider(t, status(429, "Retry-After", "30"), status(200))
	c = outbound.New(outbound.Options{BaseURL: long.URL, Retries: 2})
	res, err = c.Do(context.Background(), outbound.Request{Method: http.MethodGet, Path: "/x"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, res.Status)
	assert.Equal(t, 30*time.Second, res.RetryAfter())
	assert.Equal(t, 1, long.calls(), "a Retry-After longer than MaxRetryWait is not waited for in the call")

	refused := newProvider(t, status(400), status(200))
	c = outbound.New(outbound.Options{BaseURL: refused.URL, Retries: 2})
	res, err = c.Do(context.Background(), outbound.Request{Method: http.MethodGet, Path: "/x"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, 1, refused.calls(), "a refusal is not retried")
}

// TestBudgetRefusalSendsNothing: the budget's error ends the call as it is, before any try.
func TestBudgetRefusalSendsNothing(t *testing.T) {
	p := newProvider(t, status(200))
	spent := errors.New("budget spent")
	c := outbound.New(outbound.Options{BaseURL: p.URL, Budget: func(context.Context) error { return spent }})
	_, err := c.Do(context.Background(), outbound.Request{Method: http.MethodGet, Path: "/x"})
	assert.ErrorIs(t, err, spent)
	assert.Zero(t, p.calls())
}

// TestTimeoutNotRepeated: a try without an answer in time is a TransportError "timed out", sent
// (a connection was made), and not tried again within the call.
func TestTimeoutNotRepeated(t *testing.T) {
	release := make(chan struct{})
	p := newProvider(t, func(w http.ResponseWriter) { <-release })
	defer close(release)
	c := outbound.New(outbound.Options{Name: "test provider", BaseURL: p.URL, Retries: 2, Timeout: 300 * time.Millisecond})
	_, err := c.Do(context.Background(), outbound.Request{Method: http.MethodPost, Path: "/x"})
	var te *outbound.TransportError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "test provider timed out", err.Error())
	assert.True(t, outbound.TimedOut(err))
	assert.False(t, outbound.NotSent(err), "the request reached the provider")
	assert.Equal(t, 1, p.calls())
}

// TestUnreachableNeverSent: a provider no connection reaches is "unreachable", never sent, and
// the error names neither the address nor the secret; the log has the cause without the secret.
func TestUnreachableNeverSent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	var logs bytes.Buffer
	c := outbound.New(outbound.Options{Name: "test provider", BaseURL: "http://" + addr, Bearer: token, Retries: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, err = c.Do(context.Background(), outbound.Request{Method: http.MethodGet, Path: "/zones/" + token + "?q=1"})
	require.Error(t, err)
	assert.Equal(t, "test provider unreachable", err.Error())
	assert.True(t, outbound.NotSent(err))
	assert.Contains(t, logs.String(), "connection refused")
	assert.Contains(t, logs.String(), addr)
	assert.NotContains(t, logs.String(), token)
	assert.NotContains(t, logs.String(), "q=1", "the query is left out of the log")
	assert.Equal(t, 2, strings.Count(logs.String(), "test provider call failed"), "a connection error is retried")

	bad := outbound.New(outbound.Options{Name: "test provider", BaseURL: "http://bad host"})
	_, err = bad.Do(context.Background(), outbound.Request{Method: http.MethodGet, Path: "/"})
	assert.Equal(t, "test provider request could not be built", err.Error())
	assert.True(t, outbound.NotSent(err))
}

// TestNotSentCountsEveryTry: a call whose first try reached the provider (a 503) and whose retry
// found it unreachable may have been carried out: its error is not NotSent.
func TestNotSentCountsEveryTry(t *testing.T) {
	var p *provider
	p = newProvider(t, func(w http.ResponseWriter) {
		w.Header().Set("Connection", "close") // the retry needs a new connection, which is refused
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = p.Listener.Close()
	})
	c := outbound.New(outbound.Options{Name: "test provider", BaseURL: p.URL, Retries: 1})
	_, err := c.Do(context.Background(), outbound.Request{Method: http.MethodPost, Path: "/x"})
	require.Error(t, err)
	assert.Equal(t, "test provider unreachable", err.Error())
	assert.False(t, outbound.NotSent(err), "the first try reached the provider")
	assert.Equal(t, 1, p.calls())
}

// TestCancelled: a call whose caller gave up is "call cancelled".
func TestCancelled(t *testing.T) {
	release := make(chan struct{})
	p := newProvider(t, func(w http.ResponseWriter) { <-release })
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	var once atomic.Bool
	c := outbound.New(outbound.Options{Name: "p", BaseURL: p.URL, Budget: func(context.Context) error {
		if once.CompareAndSwap(false, true) {
			go func() {
				for p.calls() == 0 {
					time.Sleep(10 * time.Millisecond)
				}
				cancel()
			}()
		}
		return nil
	}})
	_, err := c.Do(ctx, outbound.Request{Method: http.MethodGet, Path: "/"})
	assert.Equal(t, "p call cancelled", err.Error())
}

// TestBodyBoundedAndSecretsRedacted: the body is read up to MaxBody; Redact takes the client's
// secrets (and anything token-like) out of a provider's words.
func TestBodyBoundedAndSecretsRedacted(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter) { _, _ = w.Write([]byte(strings.Repeat("x", 100))) })
	c := outbound.New(outbound.Options{BaseURL: p.URL, MaxBody: 10, Bearer: token, Password: "hunter2-hunter2"})
	res, err := c.Do(context.Background(), outbound.Request{Method: http.MethodGet, Path: "/"})
	require.NoError(t, err)
	assert.Len(t, res.Body, 10)
	msg := c.Redact("bad header: Bearer "+token+" and hunter2-hunter2\n", 200)
	assert.NotContains(t, msg, token)
	assert.NotContains(t, msg, "hunter2-hunter2")
	assert.NotContains(t, msg, "\n")
}

// TestStatusClasses: which statuses a retry may change.
func TestStatusClasses(t *testing.T) {
	for _, s := range []int{301, 302, 307, 408, 429, 500, 502, 503, 504} {
		assert.True(t, outbound.Retryable(s), "%d", s)
		assert.False(t, outbound.Refusal(s), "%d", s)
	}
	for _, s := range []int{400, 401, 403, 404, 409, 422} {
		assert.False(t, outbound.Retryable(s), "%d", s)
		assert.True(t, outbound.Refusal(s), "%d", s)
	}
	for _, s := range []int{200, 201, 204} {
		assert.False(t, outbound.Retryable(s) || outbound.Refusal(s), "%d", s)
	}
}
