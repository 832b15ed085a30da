// Package wfautotest is an in-process fake of a workflow-automation provisioning cell for tests:
// POST /accounts makes an account, idempotent on Idempotency-Key (a key sent again is answered
// with the key's first account whoever asks; optionally strict: with another body, 422; optionally
// echoing the email and userId the account was made for), DELETE /accounts/{id} deletes one, the bearer key is
// checked, and faults are injected: error statuses, 429/503 with Retry-After, slow (hung)
// answers, malformed or leaking answers, redirects, random faults.
package wfautotest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is how the cell answers until the next SetMode.
type Mode string

// The modes. The account-making ones (Garbage to LongURL, Dup, Hang) make the account (or return
// the one the key already made) before answering.
const (
	OK Mode = "" // the documented answers
	// Error answers, nothing made.
	Fail500     Mode = "500"       // 500 {"error":"internal","message":"database is down"}
	Refuse400   Mode = "400"       // 400 {"error":"bad_request","message":"organization not allowed"}
	RefuseCode  Mode = "403"       // 403 {"error":"organization_not_allowed","message":"ask the cell's operator"}
	Conflict409 Mode = "409"       // 409: a request with this key is in progress
	Leak        Mode = "leak"      // a 500 whose message quotes the cell's key and another token, long
	LeakHTML    Mode = "leak-html" // a proxy's 502 HTML page quoting the key
	Throttle    Mode = "throttle"  // SetThrottle's status and Retry-After
	Redirect    Mode = "redirect"  // every call is moved (301) to /moved/…, where a GET answers 200
	// Answers to a create that made the account.
	Garbage    Mode = "garbage"     // 200 with an HTML body
	MissingURL Mode = "missing-url" // 200 without url
	NulID      Mode = "nul-id"      // 201, a NUL in accountId (PostgreSQL cannot store it)
	NewlineID  Mode = "newline-id"  // 201, a newline in accountId
	C1URL      Mode = "c1-url"      // 201, a C1 control character in url
	LongID     Mode = "long-id"     // 201, an accountId over 5000 bytes
	LongURL    Mode = "long-url"    // 201, a url over 5000 bytes
	Dup        Mode = "dup"         // 201 naming another account (SetDup's id)
	// Hang answers SetHang's duration late (the account made after it), whatever the request.
	Hang Mode = "hang"
)

// Fault is one random failure (SetRandFault): after Delay, Status with an empty body; nothing is made
// or deleted.
type Fault struct {
	Status int
	Delay  time.Duration
}

// Post is one POST /accounts the cell got (authorised).
type Post struct {
	Key  string         // its Idempotency-Key
	Body map[string]any // its JSON body
}

// accountSeq numbers the accounts of every fake cell of the process: like a real cell's, an
// account id is never given twice, even by the cells of two tests sharing one control database.
var accountSeq atomic.Int64

// Cell is the fake cell.
type Cell struct {
	*httptest.Server
	Key string // the API key it expects as a bearer token

	randFault atomic.Pointer[func() *Fault]

	mu       sync.Mutex
	accounts map[string]string // idempotency key -> account id
	// strict makes the cell fingerprint the body per Idempotency-Key, as the IETF Idempotency-Key
	// draft does: a key sent again with another body is answered 422 idempotency_mismatch.
	strict       bool
	echo         bool
	fingerprints map[string]string // idempotency key -> body of the request that made the account
	deleted      []string
	posts        []Post
	creates      int
	calls        int // authorised requests
	mode         Mode
	// dupID is the accountId of mode Dup: the answer names this (another) account.
	dupID string
	hang  time.Duration
	// throttle is the status (429, 503) and Retry-After of mode Throttle.
	throttle struct {
		status     int
		retryAfter string
	}
}

// New starts a fake cell expecting key; the caller closes it.
func New(key string) *Cell {
	c := &Cell{Key: key, accounts: map[string]string{}, fingerprints: map[string]string{}}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

// SetRandFault sets a function called per request, before the key is checked: a fault it returns
// is answered instead (nil: none). SetRandFault(nil) removes it.
func (c *Cell) SetRandFault(f func() *Fault) {
	if f == nil {
		c.randFault.Store(nil)
		return
	}
	c.randFault.Store(&f)
}

// SetMode sets how the cell answers from now on (OK: as documented).
func (c *Cell) SetMode(m Mode) { c.mu.Lock(); c.mode = m; c.mu.Unlock() }

// SetHang sets how late mode Hang answers.
func (c *Cell) SetHang(d time.Duration) { c.mu.Lock(); c.hang = d; c.mu.Unlock() }

// SetThrottle sets mode Throttle: every call is answered status (429, 503…) with an error body and
// Retry-After: retryAfter (none when empty).
func (c *Cell) SetThrottle(status int, retryAfter string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode = Throttle
	c.throttle.status, c.throttle.retryAfter = status, retryAfter
}

// SetDup sets mode Dup: a create is answered with account id (another account's), as a broken
// cell may answer.
func (c *Cell) SetDup(id string) { c.mu.Lock(); c.mode, c.dupID = Dup, id; c.mu.Unlock() }

// SetStrict makes the cell fingerprint the body per Idempotency-Key (the IETF Idempotency-Key
// draft): a key sent again with another body is answered 422 idempotency_mismatch.
func (c *Cell) SetStrict(on bool) { c.mu.Lock(); c.strict = on; c.mu.Unlock() }

// SetEcho makes the documented answer echo the email and userId of the request that made the
// account (the key's first), as a cell may: a key sent again by someone else gets the first
// requester's, like the rest of the first answer.
func (c *Cell) SetEcho(on bool) { c.mu.Lock(); c.echo = on; c.mu.Unlock() }

// Held reports whether the cell holds an account for Idempotency-Key key (made and not deleted).
func (c *Cell) Held(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	acc, ok := c.accounts[key]
	if !ok {
		return false
	}
	for _, d := range c.deleted {
		if d == acc {
			return false
		}
	}
	return true
}

// AccountOf is the account the cell made for Idempotency-Key key ("" when none).
func (c *Cell) AccountOf(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accounts[key]
}

// Calls counts the authorised requests; Creates the accounts made.
func (c *Cell) Calls() int   { c.mu.Lock(); defer c.mu.Unlock(); return c.calls }
func (c *Cell) Creates() int { c.mu.Lock(); defer c.mu.Unlock(); return c.creates }

// Deleted are the account ids of every DELETE, in order.
func (c *Cell) Deleted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.deleted...)
}

// Posts are the creates the cell got, in order.
func (c *Cell) Posts() []Post {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Post(nil), c.posts...)
}

func (c *Cell) serve(w http.ResponseWriter, r *http.Request) {
	if f := c.randFault.Load(); f != nil {
		if ft := (*f)(); ft != nil {
			time.Sleep(ft.Delay)
			w.WriteHeader(ft.Status)
			return
		}
	}
	if r.Header.Get("Authorization") != "Bearer "+c.Key {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"unauthorized"}`))
		return
	}
	c.mu.Lock()
	c.calls++
	mode, hang, throttle := c.mode, c.hang, c.throttle
	c.mu.Unlock()
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/moved/") { // where mode Redirect sends a delete
		_, _ = w.Write([]byte(`{"moved":true}`))
		return
	}
	switch mode {
	case Redirect: // a misplaced cell (an http address the cell moves to https, a proxy): every call is moved
		http.Redirect(w, r, "/moved"+r.URL.Path, http.StatusMovedPermanently)
		return
	case Throttle:
		if throttle.retryAfter != "" {
			w.Header().Set("Retry-After", throttle.retryAfter)
		}
		w.WriteHeader(throttle.status)
		_, _ = w.Write([]byte(`{"error":"rate_limited","message":"slow down"}`))
		return
	case Fail500:
		w.WriteHeader(500)
		_, _ = w.Write([]byte(`{"error":"internal","message":"database is down"}`))
		return
	case Refuse400:
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"error":"bad_request","message":"organization not allowed"}`))
		return
	case RefuseCode:
		w.WriteHeader(403)
		_, _ = w.Write([]byte(`{"error":"organization_not_allowed","message":"ask the cell's operator"}`))
		return
	case Conflict409:
		w.WriteHeader(409)
		_, _ = w.Write([]byte(`{"error":"conflict","message":"a request with this key is in progress"}`))
		return
	case Leak: // a careless cell quoting the key it was sent, and other secrets
		w.WriteHeader(500)
		_, _ = w.Write([]byte(`{"error":"internal","message":"upstream refused Authorization: Bearer ` + c.Key +
			` (key=` + c.Key + `); dsn token=sk_live_9f8e7d6c5b4a39281706f5e4d3c2b1a0 failed` + strings.Repeat(" and more", 100) + `"}`))
		return
	case LeakHTML:
		w.WriteHeader(502)
		_, _ = w.Write([]byte(`<html><body>proxy error, config api_key ` + c.Key + `</body></html>`))
		return
	case Hang:
		time.Sleep(hang)
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/accounts":
		key := r.Header.Get("Idempotency-Key")
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		c.mu.Lock()
		c.posts = append(c.posts, Post{Key: key, Body: body})
		if fp, seen := c.fingerprints[key]; c.strict && seen && fp != string(raw) {
			c.mu.Unlock()
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error":"idempotency_mismatch","message":"this Idempotency-Key was used with another body"}`))
			return
		}
		id, ok := c.accounts[key]
		if !ok {
			c.creates++
			id = fmt.Sprintf("acc_%d", accountSeq.Add(1))
			c.accounts[key] = id
			c.fingerprints[key] = string(raw)
		}
		dupID, echo := c.dupID, ""
		if c.echo {
			var first struct {
				Email  string          `json:"email"`
				UserID json.RawMessage `json:"userId"`
			}
			_ = json.Unmarshal([]byte(c.fingerprints[key]), &first)
			email, _ := json.Marshal(first.Email)
			if len(first.UserID) == 0 {
				first.UserID = json.RawMessage("null")
			}
			echo = `,"email":` + string(email) + `,"userId":` + string(first.UserID)
		}
		c.mu.Unlock()
		switch mode {
		case Garbage:
			_, _ = w.Write([]byte(`<html>oops</html>`))
		case Dup: // another account's id (dupID), as a broken cell may answer
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"accountId":"` + dupID + `","url":"https://flows.example.test/` + dupID + `"}`))
		case MissingURL:
			_, _ = w.Write([]byte(`{"accountId":"` + id + `"}`))
		case NulID: // an id PostgreSQL cannot store
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"accountId":"` + id + `\u0000x","url":"https://flows.example.test/` + id + `"}`))
		case NewlineID:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"accountId":"` + id + `\nlevel=ERROR","url":"https://flows.example.test/` + id + `"}`))
		case C1URL:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"accountId":"` + id + `","url":"https://flows.example.test/` + id + `\u0085"}`))
		case LongID:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"accountId":"` + id + strings.Repeat("x", 5000) + `","url":"https://flows.example.test/` + id + `"}`))
		case LongURL:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"accountId":"` + id + `","url":"https://flows.example.test/` + strings.Repeat("x", 5000) + `"}`))
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"accountId":"` + id + `","url":"https://flows.example.test/` + id + `"` + echo + `}`))
		}
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/accounts/"):
		c.mu.Lock()
		c.deleted = append(c.deleted, strings.TrimPrefix(r.URL.Path, "/accounts/"))
		c.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(404)
	}
}
