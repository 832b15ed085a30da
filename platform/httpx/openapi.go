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

// documentBadRequest makes the error responses of op say what the server answers: validation
// failures are 400, never 422 (a 422 an operation describes itself is kept). Every operation
// documents 400, 413 and 415, since the middleware answers them before routing whatever the
// operation: a URL holding a NUL character (%00) is a 400, a body over BodyLimit a 413 (as soon as
// the headers announce it), and a compressed body or one declared in a charset other than UTF-8 a
// 415, even to an operation that takes no body (a body sent anyway). An operation with a body
// also answers 415 for a Content-Type other than JSON. An error huma describes by its reason
// phrase alone ("Bad Request") is described by errorDescriptions.
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

// documentLimitHeaders declares the rate-limit headers on every response of op, as Register
// declares Retry-After on its 429; here, after every route is registered, so that the operations
// documented by hand (the AI pass-through) have them too. An answer below 400 has passed every
// limit, which sent them: they are required there. An error may have been answered before any
// limit counted (a URL holding %00, a body over BodyLimit, a compressed one) or without them (the
// AI pass-through relaying its upstream's 429): optional, and declared by their schema alone: the
// successes describe them, once in the served document (shareComponents). Headers a response
// already declares are kept. Each response gets a map of its own (responses may share theirs).
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
