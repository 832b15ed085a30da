package httpx_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/httpx"
)

// bodiesRead counts the requests the encoding test routes' handlers ran for.
var bodiesRead atomic.Int64

// registerBodyReaders adds POST /api/raw-body (a Fiber route reading c.Body(), as the AI
// pass-through does) and POST /api/huma-body (a huma operation with a body).
func registerBodyReaders(api *httpx.API) {
	api.Fiber().Post("/api/raw-body", func(c *fiber.Ctx) error {
		bodiesRead.Add(1)
		return c.JSON(fiber.Map{"success": true, "message": "ok", "data": len(c.Body())})
	})
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "humaBody", Method: http.MethodPost, Path: "/api/huma-body"},
		func(ctx context.Context, in *struct {
			Body struct {
				Name string `json:"name"`
			}
		}) (*httpx.Response[string], error) {
			bodiesRead.Add(1)
			return httpx.OK("ok", in.Body.Name), nil
		})
}

// gzipBomb is a small gzip stream that inflates to n bytes of spaces (valid JSON whitespace).
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for i := 0; i < n>>20; i++ {
		_, err = w.Write(chunk)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

// TestCompressedBodiesAreRefused: Fiber's c.Body() inflated a gzip body without bound (the
// 1 MiB limit counts compressed bytes), so a few hundred KB became hundreds of MB before the
// huma route answered 413, and a Fiber route received the inflated body. Any Content-Encoding
// but identity is a 415 before a handler runs, on every route.
func TestCompressedBodiesAreRefused(t *testing.T) {
	base := newServer(t)
	bomb := gzipBomb(t, 64<<20)
	require.Less(t, len(bomb), httpx.BodyLimit, "the bomb fits the limit compressed")
	for _, path := range []string{"/api/raw-body", "/api/huma-body", "/api/widgets"} {
		for _, enc := range []string{"gzip", "br", "deflate", "identity, gzip", "x-unknown"} {
			before := bodiesRead.Load()
			req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(bomb))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Content-Encoding", enc)
			start := time.Now()
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode, "%s %s: %s", path, enc, raw)
			assert.Contains(t, string(raw), `"success":false`)
			assert.Contains(t, string(raw), "Content-Encoding")
			assert.Equal(t, "identity", res.Header.Get("Accept-Encoding"))
			assert.NotEmpty(t, res.Header.Get("X-Request-Id"))
			assert.Equal(t, before, bodiesRead.Load(), "%s %s: no handler ran", path, enc)
			assert.Less(t, time.Since(start), 2*time.Second, "%s %s answered before inflating", path, enc)
		}
	}
	// Chunked (a reader of unknown length), with no Content-Length, likewise.
	before := bodiesRead.Load()
	req, err := http.NewRequest(http.MethodPost, base+"/api/huma-body", io.MultiReader(bytes.NewReader(bomb)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode)
	assert.Equal(t, before, bodiesRead.Load())
	// A plain body, with or without Content-Encoding: identity, is read as before.
	for _, hdr := range []map[string]string{nil, {"Content-Encoding": "identity"}, {"Content-Encoding": "IDENTITY"}} {
		for _, path := range []string{"/api/raw-body", "/api/huma-body"} {
			res, env, raw := call(t, "POST", base+path, `{"name":"plain"}`, hdr)
			assert.Equal(t, http.StatusOK, res.StatusCode, "%s %v: %s", path, hdr, raw)
			assert.True(t, env.Success)
		}
	}
	// A request without a body has nothing to inflate, whatever it says.
	res, _, raw := call(t, "GET", base+"/api/widgets/1", "", map[string]string{"Content-Encoding": "gzip"})
	assert.Equal(t, http.StatusOK, res.StatusCode, raw)
	// A compressed body is refused before routing, on a route that takes none as well.
	res, _, raw = call(t, "POST", base+"/api/widgets/1/poke", "\x1f\x8b", map[string]string{"Content-Encoding": "gzip"})
	assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode, raw)
}

// TestNonUTF8CharsetsAreRefused: a body declared as UTF-16 (or Latin-1) was decoded as UTF-8, so
// it was misread or refused with a JSON syntax error that did not say why. It is a 415 naming the
// charset, before any handler runs; UTF-8 (any spelling and case) and US-ASCII are read as before.
func TestNonUTF8CharsetsAreRefused(t *testing.T) {
	base := newServer(t)
	for _, path := range []string{"/api/raw-body", "/api/huma-body"} {
		for _, ct := range []string{"application/json; charset=utf-16", "application/json;charset=UTF-16LE",
			"application/json; charset=iso-8859-1", `application/json; charset="windows-1252"`} {
			before := bodiesRead.Load()
			res, env, raw := call(t, "POST", base+path, `{"name":"x"}`, map[string]string{"Content-Type": ct})
			assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode, "%s %s: %s", path, ct, raw)
			assert.False(t, env.Success)
			assert.Contains(t, env.Message, "charset", raw)
			assert.Equal(t, before, bodiesRead.Load(), "%s %s: no handler ran", path, ct)
		}
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8",
			"application/json; charset=utf8", "application/json; charset=us-ascii"} {
			res, env, raw := call(t, "POST", base+path, `{"name":"x"}`, map[string]string{"Content-Type": ct})
			assert.Equal(t, http.StatusOK, res.StatusCode, "%s %s: %s", path, ct, raw)
			assert.True(t, env.Success)
		}
	}
}

// TestWhichContentTypesAreJSON pins what README says a body's Content-Type may be: application/json
// in any case, a +json type, or none at all, is read as JSON; anything else is a 415.
func TestWhichContentTypesAreJSON(t *testing.T) {
	base := newServer(t)
	for _, ct := range []string{"application/json", "APPLICATION/JSON", "application/merge-patch+json", ""} {
		req, err := http.NewRequest(http.MethodPost, base+"/api/huma-body", strings.NewReader(`{"name":"x"}`))
		require.NoError(t, err)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, "%q: %s", ct, raw)
	}
	for _, ct := range []string{"text/plain", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded"} {
		res, env, raw := call(t, "POST", base+"/api/huma-body", `{"name":"x"}`, map[string]string{"Content-Type": ct})
		assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode, "%q: %s", ct, raw)
		assert.Equal(t, "Unsupported Content-Type: send application/json", env.Message)
	}
}
