package httpx

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/yaml"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// serveDocument adds the routes of the OpenAPI document under path (huma's OpenAPIPath): .json
// and .yaml, its components shared (shareComponents), and -3.0.json and -3.0.yaml, huma's
// OpenAPI 3.0 rendering for tools that read no 3.1. Each is rendered once, at its first request
// (every route is registered by then), and served with an ETag (If-None-Match answers 304) and
// Cache-Control: no-cache, so a reader revalidates instead of downloading it again; compressed
// with brotli or gzip when the request accepts it.
func serveDocument(app *fiber.App, path string, doc func() *huma.OpenAPI) {
	shared := func() ([]byte, error) { return sharedDocument(doc()) }
	for suffix, d := range map[string]*renderedDocument{
		".json": {contentType: "application/openapi+json", render: shared},
		".yaml": {contentType: "application/openapi+yaml", render: func() ([]byte, error) {
			b, err := shared()
			if err != nil {
				return nil, err
			}
			var out bytes.Buffer
			err = yaml.Convert(&out, bytes.NewReader(b))
			return out.Bytes(), err
		}},
		"-3.0.json": {contentType: "application/openapi+json", render: func() ([]byte, error) { return doc().Downgrade() }},
		"-3.0.yaml": {contentType: "application/openapi+yaml", render: func() ([]byte, error) { return doc().DowngradeYAML() }},
	} {
		app.Get(path+suffix, d.serve)
	}
}

// sharedDocument is doc as JSON with what its operations repeat written once under components.
func sharedDocument(doc *huma.OpenAPI) ([]byte, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v jsonObject
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	shareComponents(v)
	return []byte(canonical(v)), nil
}

// renderedDocument is one rendering of the document, with its validator and compressed forms.
type renderedDocument struct {
	contentType string
	render      func() ([]byte, error)

	once sync.Once
	err  error
	tag  string // the strong ETag of the identity encoding, without quotes
	// bodies by content coding: "" (identity), "br", "gzip".
	bodies map[string][]byte
}

func (d *renderedDocument) prepare() {
	body, err := d.render()
	if err != nil {
		d.err = err
		return
	}
	sum := sha256.Sum256(body)
	d.tag = base64.RawURLEncoding.EncodeToString(sum[:18])
	d.bodies = map[string][]byte{
		"":     body,
		"gzip": fasthttp.AppendGzipBytesLevel(nil, body, fasthttp.CompressBestCompression),
		"br":   fasthttp.AppendBrotliBytesLevel(nil, body, fasthttp.CompressBrotliBestCompression),
	}
}

// etag is the strong validator of the body in coding: one per content coding (RFC 9110 8.8.3).
func (d *renderedDocument) etag(coding string) string {
	if coding == "" {
		return `"` + d.tag + `"`
	}
	return `"` + d.tag + "-" + coding + `"`
}

func (d *renderedDocument) serve(c *fiber.Ctx) error {
	d.once.Do(d.prepare)
	if d.err != nil {
		return d.err
	}
	coding := acceptedCoding(c.Get(fiber.HeaderAcceptEncoding))
	c.Vary(fiber.HeaderAcceptEncoding)
	// The document holds no secret: it may be kept, if it is revalidated before each use.
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderETag, d.etag(coding))
	if d.matches(c.Get(fiber.HeaderIfNoneMatch)) {
		return c.SendStatus(http.StatusNotModified)
	}
	if coding != "" {
		c.Set(fiber.HeaderContentEncoding, coding)
	}
	c.Set(fiber.HeaderContentType, d.contentType)
	return c.Send(d.bodies[coding])
}

// matches reports whether an If-None-Match names the document in any content coding (the weak
// comparison RFC 9110 13.1.2 asks for: a W/ prefix is ignored), or is "*".
func (d *renderedDocument) matches(ifNoneMatch string) bool {
	for _, t := range strings.Split(ifNoneMatch, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == d.etag("") || t == d.etag("gzip") || t == d.etag("br") {
			return true
		}
	}
	return false
}

// acceptedCoding is the content coding to answer an Accept-Encoding with: br or gzip, whichever
// the request weighs more (a q of 0 refuses one; * stands for any coding not named); "" for none.
func acceptedCoding(accept string) string {
	q := map[string]float64{}
	for _, item := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(item, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		weight := 1.0
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					weight = f
				}
			}
		}
		q[name] = weight
	}
	best, weight := "", 0.0
	for _, coding := range []string{"br", "gzip"} { // br first on a tie: the smaller
		w, named := q[coding]
		if !named {
			w, named = q["*"]
		}
		if named && w > weight {
			best, weight = coding, w
		}
	}
	return best
}
