package httpx

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
)

// finishDocument completes doc once every route is registered. Validation failures are answered
// 400, never 422: keep the document true to that (documentBadRequest). The rate-limit headers are
// declared on the responses of every operation but the probes'. Every tag used is declared
// globally, and every operation has a description.
func finishDocument(doc *huma.OpenAPI, limitHeaders map[string]*huma.Param, tags map[string]string) {
	declared := map[string]bool{}
	for _, t := range doc.Tags {
		declared[t.Name] = true
	}
	var names []string
	for path, item := range doc.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Put, item.Delete, item.Patch} {
			if op == nil {
				continue
			}
			documentBadRequest(op)
			if !Probe(path) {
				documentLimitHeaders(op, limitHeaders)
			}
			if op.Description == "" {
				op.Description = op.Summary + "."
			}
			for _, t := range op.Tags {
				if !declared[t] {
					declared[t] = true
					names = append(names, t)
				}
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		doc.Tags = append(doc.Tags, &huma.Tag{Name: n, Description: tags[n]})
	}
}

// documentBadRequest makes op's error responses say what the server answers: validation failures
// are 400, never 422 (a 422 the operation describes itself is kept); every operation documents 400,
// 413 and 415, which the middleware answers before routing (a NUL in the URL, a body over
// BodyLimit, a compressed or non-UTF-8 body), and one with a body the 415 of a non-JSON type.
func documentBadRequest(op *huma.Operation) {
	if op.Responses == nil {
		op.Responses = map[string]*huma.Response{}
	}
	template := op.Responses["422"]
	if template == nil {
		template = op.Responses["500"]
	}
	if r := op.Responses["422"]; r != nil && r.Description == http.StatusText(http.StatusUnprocessableEntity) {
		// huma's own 422 (validation), which the server answers as 400. A 422 an operation
		// describes itself (the AI pass-through relays the upstream's) is an answer it gives.
		delete(op.Responses, "422")
	}
	if template == nil {
		// An operation documented by hand (GET /metrics, whose answer is not the envelope): the
		// middleware's refusals are still the envelope.
		template = &huma.Response{Content: map[string]*huma.MediaType{
			"application/json": {Schema: &huma.Schema{Ref: "#/components/schemas/Error"}}}}
	}
	set := func(code, description string) {
		if op.Responses[code] == nil {
			op.Responses[code] = &huma.Response{Description: description, Content: template.Content}
		}
	}
	set("413", "A body over 1 MiB, refused before routing (even by an operation that takes no body).")
	set("415", "A compressed body (a `Content-Encoding` other than `identity`; the answer carries "+
		"`Accept-Encoding: identity`) or a `Content-Type` whose `charset` is not `utf-8`, refused before routing "+
		"(even by an operation that takes no body); and, to an operation that takes a body, a `Content-Type` other than JSON.")
	for code, r := range op.Responses {
		if status, err := strconv.Atoi(code); err == nil && r.Description == http.StatusText(status) && errorDescriptions[status] != "" {
			r.Description = errorDescriptions[status]
		}
	}
	set("400", errorDescriptions[http.StatusBadRequest])
}

// errorDescriptions say what the errors most operations answer mean, in place of huma's reason
// phrase ("Bad Request"); an operation that documents an error its own way keeps its words.
var errorDescriptions = map[int]string{
	http.StatusBadRequest:          "Validation failed (`errors` lists every invalid field), a malformed JSON body, or a NUL (`%00`) in the URL.",
	http.StatusUnauthorized:        "Missing, malformed, expired or revoked credentials.",
	http.StatusForbidden:           "The caller's role does not allow the operation (it needs Admin).",
	http.StatusNotFound:            "No such resource, or one of another user (never a 403 for those).",
	http.StatusConflict:            "A duplicate, a quota reached, a state that does not allow the change, or the first request with the same `Idempotency-Key` still being answered.",
	http.StatusTooManyRequests:     "A rate limit was reached: `Retry-After` says when to try again.",
	http.StatusInternalServerError: "An unexpected error; the server's log has it under the request's `X-Request-Id`.",
	http.StatusBadGateway:          "A provider or an engine failed; `data` holds the resource as stored, if any.",
	http.StatusServiceUnavailable:  "A dependency is unavailable, or a concurrent change got in the way.",
}

// documentLimitHeaders declares the rate-limit headers on every response of op, after every route
// is registered (so the hand-documented AI pass-through has them too): required below 400 (the
// answer passed every limit), optional on errors (some are answered before any limit counts, or
// relay the upstream's 429). Headers a response already declares are kept.
func documentLimitHeaders(op *huma.Operation, headers map[string]*huma.Param) {
	if len(headers) == 0 {
		return
	}
	for code, r := range op.Responses {
		status, err := strconv.Atoi(code)
		always := err == nil && status < 400
		own := make(map[string]*huma.Param, len(r.Headers)+len(headers))
		for k, v := range r.Headers {
			own[k] = v
		}
		for k, v := range headers {
			if own[k] == nil {
				p := *v
				p.Required = always
				if !always {
					p.Description, p.Example = "", nil
				}
				own[k] = &p
			}
		}
		r.Headers = own
	}
}
