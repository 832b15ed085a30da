// Package aikeystest is an in-process fake of an OpenAI-compatible upstream for tests: POST
// /chat/completions with the bearer key checked, answered with a completion or an SSE stream
// (usage on a chunk of its own when stream_options.include_usage asks for it), and faults
// injected: any status with its body and headers (a 429 carries Retry-After: 7, a 401 or 403
// quotes the key as OpenAI does), slow, stalled and hanging answers, answers too large to read,
// connections dropped unanswered.
package aikeystest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// Behaviour is how the fake answers; change it with Set. The zero value answers as documented.
type Behaviour struct {
	// Fail is a status to answer every request with (any but 0, even 200), with FailBody (default:
	// an "upstream exploded" OpenAI error; for a 401 or 403, OpenAI's "Incorrect API key provided"
	// quoting the key), Content-Type application/json and a 429's Retry-After: 7. FailHeader sets
	// headers on that answer (an empty value removes one: Content-Type, the 429's Retry-After);
	// FailOnce answers Fail to one request only.
	Fail       int
	FailBody   string
	FailHeader map[string]string
	FailOnce   bool
	// Huge answers with more than the gateway reads (17 MiB), with status Fail when set.
	Huge bool
	// Delay answers this late.
	Delay time.Duration
	// A streamed answer sends its first chunk, then waits on Release (when set) before the rest;
	// Finished is closed when the answer is complete or the request's context ended.
	Release, Finished chan struct{}
	// DropReused closes a connection, unanswered, when a second request arrives on it (the
	// upstream closing an idle keep-alive connection as the request comes); DropAll does so for
	// every request.
	DropReused, DropAll bool
	// A streamed answer of Ticks extra chunks, Tick apart (slow but steady).
	Ticks int
	Tick  time.Duration
	// UsageInLast puts the usage on the last content chunk (as some OpenAI-compatible servers
	// do) instead of a usage-only chunk of its own.
	UsageInLast bool
	// IgnoreStream answers a stream request with the plain JSON completion (status 200).
	IgnoreStream bool
	// StreamWrites, when set, is a streamed answer written as these pieces, each flushed and
	// 100 ms after the one before (so they reach the gateway in separate reads).
	StreamWrites []string
	// OKBody, when set, is the non-streamed answer (status 200).
	OKBody string
	// Hang answers nothing until the request's context ends, then closes Finished.
	Hang bool
}

// Upstream is the fake.
type Upstream struct {
	*httptest.Server
	Key string // the API key it expects as a bearer token

	mu              sync.Mutex
	b               Behaviour
	bodies          []map[string]any
	served, dropped int
}

type connRequests struct{}

// New starts a fake expecting key; configure, if given, adjusts its server first (say
// IdleTimeout). The caller closes it.
func New(key string, configure ...func(*http.Server)) *Upstream {
	u := &Upstream{Key: key}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connRequests{}, new(atomic.Int32))
	}
	for _, f := range configure {
		f(u.Config)
	}
	u.Start()
	return u
}

// Set changes the behaviour: f is called with it, under the fake's lock.
func (u *Upstream) Set(f func(b *Behaviour)) { u.mu.Lock(); f(&u.b); u.mu.Unlock() }

// Bodies are the JSON bodies of the requests served (not dropped), in order.
func (u *Upstream) Bodies() []map[string]any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]map[string]any(nil), u.bodies...)
}

// Served counts the requests that reached the handler and were answered (or hung); Dropped those
// whose connection was closed unanswered.
func (u *Upstream) Served() int  { u.mu.Lock(); defer u.mu.Unlock(); return u.served }
func (u *Upstream) Dropped() int { u.mu.Lock(); defer u.mu.Unlock(); return u.dropped }

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/chat/completions" || r.Header.Get("Authorization") != "Bearer "+u.Key {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"bad upstream key","type":"invalid_request_error"}}`))
		return
	}
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	nth := r.Context().Value(connRequests{}).(*atomic.Int32).Add(1)
	u.mu.Lock()
	if u.b.DropAll || (u.b.DropReused && nth > 1) {
		u.dropped++
		u.mu.Unlock()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	u.served++
	u.bodies = append(u.bodies, body)
	b := u.b
	if u.b.FailOnce {
		u.b.Fail = 0
	}
	u.mu.Unlock()
	if b.Hang {
		<-r.Context().Done()
		if b.Finished != nil {
			close(b.Finished)
		}
		return
	}
	if b.Delay > 0 {
		time.Sleep(b.Delay)
	}
	if b.Huge {
		w.Header().Set("Content-Type", "application/json")
		if b.Fail != 0 {
			w.WriteHeader(b.Fail)
		}
		_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":"`))
		_, _ = w.Write(bytes.Repeat([]byte("a"), 17<<20))
		_, _ = w.Write([]byte(`"},"finish_reason":"stop"}]}`))
		return
	}
	if b.Fail != 0 {
		w.Header().Set("Content-Type", "application/json")
		if b.Fail == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		for k, v := range b.FailHeader {
			if v == "" {
				w.Header()[k] = nil // not even Go's sniffed Content-Type
			} else {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(b.Fail)
		if b.FailBody != "" {
			_, _ = w.Write([]byte(b.FailBody))
			return
		}
		if b.Fail == http.StatusUnauthorized || b.Fail == http.StatusForbidden { // as OpenAI does: quote the key
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error","code":"invalid_api_key"}}`, u.Key)
			return
		}
		_, _ = w.Write([]byte(`{"error":{"message":"upstream exploded","type":"server_error"}}`))
		return
	}
	if body["stream"] != true || b.IgnoreStream {
		w.Header().Set("Content-Type", "application/json")
		if b.OKBody != "" {
			_, _ = w.Write([]byte(b.OKBody))
			return
		}
		_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}`))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	if b.StreamWrites != nil {
		for i, piece := range b.StreamWrites {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			_, _ = w.Write([]byte(piece))
			fl.Flush()
		}
		return
	}
	chunk := func(s string) {
		_, _ = fmt.Fprintf(w, "data: %s\n\n", s)
		fl.Flush()
	}
	chunk(`{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"Hel"}}]}`)
	for i := 0; i < b.Ticks; i++ {
		time.Sleep(b.Tick)
		chunk(`{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"."}}]}`)
	}
	if b.Release != nil {
		select {
		case <-b.Release:
		case <-r.Context().Done():
			if b.Finished != nil {
				close(b.Finished)
			}
			return
		}
	}
	chunk(`{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"lo"}}]}`)
	opts, _ := body["stream_options"].(map[string]any)
	if b.UsageInLast && opts["include_usage"] == true {
		chunk(`{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`)
	} else {
		chunk(`{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	}
	if !b.UsageInLast && opts["include_usage"] == true {
		chunk(`{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`)
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
	if b.Finished != nil {
		close(b.Finished)
	}
}
