// Package queuestest reaches the real RabbitMQ for tests: its management API (from
// TEST_RABBITMQ_MANAGEMENT_URL, default http://guest:guest@127.0.0.1:15672, as scripts/test.sh
// sets it), the AMQP address users connect to, and a proxy in front of the management API that
// injects failures.
package queuestest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"provisioner/platform/testutil"
)

// Management is the management API's address (without credentials), user and password.
func Management() (base, user, password string) {
	u, err := url.Parse(testutil.Env("TEST_RABBITMQ_MANAGEMENT_URL", "http://guest:guest@127.0.0.1:15672"))
	if err != nil {
		panic(err)
	}
	user, password = "guest", "guest"
	if u.User != nil {
		user = u.User.Username()
		password, _ = u.User.Password()
	}
	u.User = nil
	return strings.TrimRight(u.String(), "/"), user, password
}

// Settings are the Queues:* keys for the real broker, or for base (a proxy) when given.
func Settings(base string) map[string]any {
	mgmt, user, password := Management()
	if base == "" {
		base = mgmt
	}
	u, _ := url.Parse(mgmt)
	return map[string]any{"Queues:ManagementUrl": base, "Queues:Username": user, "Queues:Password": password,
		"Queues:AmqpHost": u.Hostname(), "Queues:AmqpPort": 5672, "Queues:TimeoutSeconds": 1}
}

// Call sends one request to the real management API and returns its status and body.
func Call(t testing.TB, method, path string) (int, []byte) {
	t.Helper()
	base, user, password := Management()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("RabbitMQ management API: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, body
}

// VHostExists reports whether the broker holds vhost.
func VHostExists(t testing.TB, vhost string) bool {
	t.Helper()
	status, body := Call(t, http.MethodGet, "/api/vhosts/"+url.PathEscape(vhost))
	if status != http.StatusOK && status != http.StatusNotFound {
		t.Fatalf("GET vhost: %d %s", status, body)
	}
	return status == http.StatusOK
}

// UserExists reports whether the broker holds user.
func UserExists(t testing.TB, user string) bool {
	t.Helper()
	status, body := Call(t, http.MethodGet, "/api/users/"+url.PathEscape(user))
	if status != http.StatusOK && status != http.StatusNotFound {
		t.Fatalf("GET user: %d %s", status, body)
	}
	return status == http.StatusOK
}

// VHostsDescribed counts the broker's virtual hosts whose description is desc.
func VHostsDescribed(t testing.TB, desc string) int {
	t.Helper()
	status, body := Call(t, http.MethodGet, "/api/vhosts")
	if status != http.StatusOK {
		t.Fatalf("GET vhosts: %d %s", status, body)
	}
	var list []struct {
		Description string `json:"description"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range list {
		if v.Description == desc {
			n++
		}
	}
	return n
}

// Fault is what the proxy does to one call.
type Fault int

// The faults.
const (
	Pass         Fault = iota // forwarded as is
	Fail500                   // answered 500 without forwarding
	After500                  // forwarded (the broker acts), then answered 500
	Hang                      // forwarded, then answered after the client gave up
	GarbledAfter              // forwarded, then answered 200 with HTML
	NotJSON404                // answered 404 with a page that is not the API's
	Refuse400                 // answered the API's 400 without forwarding
	Busy503                   // answered 503, Retry-After: 120 and a 5,000-character reason, without forwarding
)

// Proxy stands in front of the real management API, answering each call as its script says.
type Proxy struct {
	URL  string
	srv  *httptest.Server
	rp   *httputil.ReverseProxy
	mu   sync.Mutex
	next func(n int, r *http.Request) Fault
	n    int
	// Hang is how long a Hang answer is held back (longer than Queues:TimeoutSeconds).
	Hang time.Duration
}

// NewProxy starts a proxy that passes everything; it is closed when the test ends.
func NewProxy(t testing.TB) *Proxy {
	base, _, _ := Management()
	target, _ := url.Parse(base)
	p := &Proxy{rp: httputil.NewSingleHostReverseProxy(target), Hang: 1500 * time.Millisecond}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// Script sets what each later call gets: f(n, r) for the n-th call (from 0) since this call.
func (p *Proxy) Script(f func(n int, r *http.Request) Fault) {
	p.mu.Lock()
	p.next, p.n = f, 0
	p.mu.Unlock()
}

// Calls is the number of calls since the last Script.
func (p *Proxy) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	f := Pass
	if p.next != nil {
		f = p.next(p.n, r)
	}
	p.n++
	hang := p.Hang
	p.mu.Unlock()
	switch f {
	case Fail500:
		http.Error(w, `{"error":"Internal Server Error","reason":"injected"}`, http.StatusInternalServerError)
		return
	case Refuse400:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"bad_request","reason":"refused by the test"}`)
		return
	case Busy503:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"error":"busy","reason":"%s"}`, strings.Repeat("x", 5000))
		return
	case NotJSON404:
		http.Error(w, "<html>no such page</html>", http.StatusNotFound)
		return
	case Pass:
		p.rp.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r) // the broker acts; its answer is lost
	switch f {
	case After500:
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	case Hang:
		select {
		case <-time.After(hang):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusGatewayTimeout)
	case GarbledAfter:
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>\x00garbled")
	}
}
