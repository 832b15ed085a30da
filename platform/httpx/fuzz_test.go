package httpx_test

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"provisioner/platform/httpx"
)

// FuzzTrustedProxies: any configured value is parsed or refused without panicking.
func FuzzTrustedProxies(f *testing.F) {
	f.Add("10.0.0.0/8")
	f.Add("::1")
	f.Add("300.1.1.1")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = httpx.ParseTrustedProxies([]string{s})
	})
}

// FuzzRequestDecoder posts arbitrary bytes to an operation with a validated body: every answer is
// a 2xx or a 4xx in the envelope, never a 500.
func FuzzRequestDecoder(f *testing.F) {
	s, err := httpx.NewServer(httpx.ServerOptions{Title: "f", Version: "1"})
	if err != nil {
		f.Fatal(err)
	}
	routes{}.Register(s.API)
	s.Finish()
	for _, b := range []string{`{"name":"a","email":"a@b.co","count":1}`, `{`, `[]`, `{"count":"x"}`, "\x00", `{"name":null}`,
		`{"name":"a","email":"a@b.co","count":2.0}`, `{"count":1e999999999999}`, `{"count":-1e-999999999999}`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/api/widgets", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := s.App.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 500 || !strings.Contains(string(raw), `"success"`) {
			t.Fatalf("%d %s for %q", res.StatusCode, raw, body)
		}
	})
}
