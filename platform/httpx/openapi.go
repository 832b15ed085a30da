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
func finishDocument(doc *huma.OpenAPI, limitHeaders map[string]*huma.Param) {
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
		doc.Tags = append(doc.Tags, &huma.Tag{Name: n, Description: TagDescriptions[n]})
	}
}

// documentBadRequest makes the error responses of op say what the server answers: validation
// failures are 400, never 422 (a 422 an operation describes itself is kept). Every operation documents 400, 413 and 415, since the middleware
// answers them before routing whatever the operation: a URL holding a NUL character (%00) is a
// 400, a body over BodyLimit a 413 (as soon as the headers announce it), and a compressed body or
// one declared in a charset other than UTF-8 a 415, even to an operation that takes no body (a
// body sent anyway). An operation with a body also answers 415 for a Content-Type other than JSON.
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
	const refused = "a compressed body (a `Content-Encoding` other than `identity`; the answer carries " +
		"`Accept-Encoding: identity`), or a `Content-Type` whose `charset` is not `utf-8`."
	if op.RequestBody == nil {
		set("413", "The operation takes no body, but one over 1 MiB was sent anyway (refused before routing).")
		set("415", "The operation takes no body, but one was sent anyway: "+refused)
	} else {
		set("413", "Request body is larger than 1 MiB.")
		set("415", "The `Content-Type` is not JSON, or "+refused)
	}
	badRequest := op.RequestBody != nil
	for _, p := range op.Parameters {
		badRequest = badRequest || paramCanFail(p)
	}
	if badRequest {
		set("400", http.StatusText(http.StatusBadRequest))
	} else {
		set("400", "The URL holds a NUL character (`%00`), refused on every route.")
	}
}

// documentLimitHeaders declares the rate-limit headers on every response of op, as Register
// declares Retry-After on its 429; here, after every route is registered, so that the operations
// documented by hand (the AI pass-through) have them too. An answer below 400 has passed every
// limit, which sent them: they are required there. An error may have been answered before any
// limit counted (a URL holding %00, a body over BodyLimit, a compressed one) or without them (the
// AI pass-through relaying its upstream's 429): optional. Headers a response already declares
// are kept. Each response gets a map of its own (responses may share theirs).
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
				own[k] = &p
			}
		}
		r.Headers = own
	}
}

// paramCanFail reports whether huma may refuse a value of p: a required query or header parameter
// that is missing, a value that must parse (a number, a boolean, a list) or meet a constraint.
func paramCanFail(p *huma.Param) bool {
	if p.Required && p.In != "path" {
		return true
	}
	s := p.Schema
	if s == nil {
		return false
	}
	if s.Type != "" && s.Type != "string" {
		return true
	}
	return len(s.Enum) > 0 || s.Pattern != "" || s.MinLength != nil || s.MaxLength != nil || s.Format != ""
}

// TagDescriptions describe the OpenAPI tags; modules may add theirs in an init function.
var TagDescriptions = map[string]string{
	"Auth":                "Registration, password sign-in and recovery, GitHub and Google sign-in, the current user.",
	"Operations":          "Liveness and readiness probes.",
	"Public":              "Public information for the landing page.",
	"Admin: users":        "User administration (role Admin).",
	"Admin: audit events": "The audit log (role Admin); every change to it is itself audited.",
}
