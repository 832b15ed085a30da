package httpx

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// jsonObject is an object of the OpenAPI document as JSON values.
type jsonObject = map[string]any

// shareComponents rewrites doc (the OpenAPI document as JSON values) so that what operations
// repeat is written once under components and referred to with $ref, without changing any answer:
// required response headers defined alike (optional ones stay inline), responses given alike (an
// operation's own description kept beside the $ref), parameters defined alike, and long operation
// descriptions given word for word ("As `POST /api/me/dns`."). Components are named after the header,
// parameter, success body schema (".Created" for a 201) or status, with the first operationId added
// when two parts would share a name ("502.createMyDnsRecord").
func shareComponents(doc jsonObject) {
	ops := documentOperations(doc)
	components := member(doc, "components")
	var headers []part
	eachResponse(ops, func(o docOperation, _ string, r jsonObject) {
		hs, _ := r["headers"].(jsonObject)
		for _, name := range sortedKeys(hs) {
			if h, _ := hs[name].(jsonObject); h != nil && h["$ref"] == nil && h["required"] == true {
				headers = append(headers, part{opID: o.id, base: headerComponent(name), key: name + "\n" + canonical(h), value: h,
					set: func(ref jsonObject) { hs[name] = ref }})
			}
		}
	})
	share(components, "headers", headers)

	responses := func(base func(code string, r jsonObject) string) []part {
		var parts []part
		eachResponse(ops, func(o docOperation, code string, r jsonObject) {
			if name := base(code, r); name != "" {
				parts = append(parts, responsePart(o, code, r, name))
			}
		})
		return parts
	}
	share(components, "responses", responses(func(code string, r jsonObject) string {
		status, err := strconv.Atoi(code)
		switch {
		case err != nil:
			return ""
		case status >= 400 || schemaName(r) == "":
			return code
		case status == http.StatusOK:
			return schemaName(r)
		default:
			return schemaName(r) + "." + statusName(status)
		}
	}))
	share(components, "responses", responses(func(code string, r jsonObject) string {
		if status, err := strconv.Atoi(code); err != nil || status < 400 {
			return ""
		}
		if name := schemaName(r); name != "" {
			return name
		}
		return "Error"
	}))

	var params []part
	for _, o := range ops {
		ps, _ := o.op["parameters"].([]any)
		for i, p := range ps {
			p, _ := p.(jsonObject)
			if p == nil || p["$ref"] != nil {
				continue
			}
			if s, _ := p["schema"].(jsonObject); s != nil && s["description"] != nil && s["description"] == p["description"] {
				delete(s, "description")
			}
			name, _ := p["name"].(string)
			params = append(params, part{opID: o.id, base: name, key: canonical(p), value: p,
				set: func(ref jsonObject) { ps[i] = ref }})
		}
	}
	share(components, "parameters", params)
	shareDescriptions(ops)
}

// sharedDescriptionLength is the length from which an operation description said twice is said once.
const sharedDescriptionLength = 200

// shareDescriptions keeps each long operation description on one operation: the others giving it
// word for word refer to that one.
func shareDescriptions(ops []docOperation) {
	keeper := map[string]docOperation{}
	restricted := func(o docOperation) bool { return o.op["x-required-role"] != nil }
	for _, o := range ops {
		d, _ := o.op["description"].(string)
		if len(d) < sharedDescriptionLength {
			continue
		}
		if k, ok := keeper[d]; !ok || restricted(k) && !restricted(o) {
			keeper[d] = o
		}
	}
	for _, o := range ops {
		d, _ := o.op["description"].(string)
		if k, ok := keeper[d]; ok && k.id != o.id {
			o.op["description"] = "As `" + strings.ToUpper(k.method) + " " + k.path + "`."
		}
	}
}

// part is one place in the document where a shareable object appears.
type part struct {
	opID string // the operation it belongs to
	base string // the component name it would take
	key  string // equal for the parts that are one object
	// value is the object, for a response without its description (description holds it): an
	// operation may word one answer its own way.
	value       jsonObject
	description *string
	set         func(ref jsonObject) // replaces the part with ref
}

func responsePart(o docOperation, code string, r jsonObject, base string) part {
	shape := make(jsonObject, len(r))
	for k, v := range r {
		if k != "description" {
			shape[k] = v
		}
	}
	description, _ := r["description"].(string)
	rs := o.op["responses"].(jsonObject)
	return part{opID: o.id, base: base, key: base + "\n" + canonical(shape), value: shape, description: &description,
		set: func(ref jsonObject) { rs[code] = ref }}
}

// share moves the parts that appear twice or more under components[kind] and refers to them.
func share(components jsonObject, kind string, parts []part) {
	groups := map[string][]part{}
	for _, p := range parts {
		groups[p.key] = append(groups[p.key], p)
	}
	keys := make([]string, 0, len(groups))
	for k, g := range groups {
		if len(g) > 1 {
			keys = append(keys, k)
		}
	}
	// The most used part of a base name takes it; then by key, for a stable document.
	sort.Slice(keys, func(i, j int) bool {
		if a, b := len(groups[keys[i]]), len(groups[keys[j]]); a != b {
			return a > b
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		g := groups[k]
		target := member(components, kind)
		name := componentName(g[0].base)
		if target[name] != nil {
			first := slices.MinFunc(g, func(a, b part) int { return strings.Compare(a.opID, b.opID) }).opID
			name += "." + componentName(first)
			for n, stem := 2, name; target[name] != nil; n++ {
				name = stem + "." + strconv.Itoa(n)
			}
		}
		component, description := g[0].value, commonDescription(g)
		if description != nil {
			component = make(jsonObject, len(g[0].value)+1)
			for k, v := range g[0].value {
				component[k] = v
			}
			component["description"] = *description
		}
		target[name] = component
		for _, p := range g {
			ref := jsonObject{"$ref": "#/components/" + kind + "/" + name}
			if p.description != nil && *p.description != *description {
				ref["description"] = *p.description
			}
			p.set(ref)
		}
	}
}

// commonDescription is the description most parts of g give (on a tie, the shortest, then the
// first in order); nil for parts that keep their description in their value.
func commonDescription(g []part) *string {
	if g[0].description == nil {
		return nil
	}
	count := map[string]int{}
	for _, p := range g {
		count[*p.description]++
	}
	best := *g[0].description
	for d, n := range count {
		if n > count[best] || (n == count[best] && (len(d) < len(best) || (len(d) == len(best) && d < best))) {
			best = d
		}
	}
	return &best
}

// docOperation is an operation of the document with its id.
type docOperation struct {
	id, method, path string
	op               jsonObject
}

// documentOperations lists the operations of doc by path, then method.
func documentOperations(doc jsonObject) []docOperation {
	paths, _ := doc["paths"].(jsonObject)
	var out []docOperation
	for _, path := range sortedKeys(paths) {
		item, _ := paths[path].(jsonObject)
		for _, method := range sortedKeys(item) {
			op, ok := item[method].(jsonObject)
			if !ok || !slices.Contains(documentMethods, method) {
				continue
			}
			id, _ := op["operationId"].(string)
			if id == "" {
				id = method + path
			}
			out = append(out, docOperation{id: id, method: method, path: path, op: op})
		}
	}
	return out
}

var documentMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// eachResponse calls f with every response of ops written out (not a $ref), by status.
func eachResponse(ops []docOperation, f func(o docOperation, code string, r jsonObject)) {
	for _, o := range ops {
		rs, _ := o.op["responses"].(jsonObject)
		for _, code := range sortedKeys(rs) {
			if r, _ := rs[code].(jsonObject); r != nil && r["$ref"] == nil {
				f(o, code, r)
			}
		}
	}
}

// schemaName is the name of the component schema of a response's body, when it has one media
// type whose schema is a $ref; "" otherwise.
func schemaName(r jsonObject) string {
	content, _ := r["content"].(jsonObject)
	if len(content) != 1 {
		return ""
	}
	for _, mt := range content {
		mt, _ := mt.(jsonObject)
		schema, _ := mt["schema"].(jsonObject)
		ref, _ := schema["$ref"].(string)
		if name, ok := strings.CutPrefix(ref, "#/components/schemas/"); ok {
			return name
		}
	}
	return ""
}

// statusName is the reason phrase of status without spaces ("Created").
func statusName(status int) string {
	if text := http.StatusText(status); text != "" {
		return strings.ReplaceAll(text, " ", "")
	}
	return "Status" + strconv.Itoa(status)
}

// headerComponent is the component name of a shared header: the rate-limit headers, written on
// every success, go by their last word ("Remaining", "Policy"); others by their name.
func headerComponent(name string) string {
	if rest, ok := strings.CutPrefix(name, "X-RateLimit-"); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(name, "RateLimit-"); ok {
		return rest
	}
	return name
}

// componentName keeps the characters a component name may hold (^[a-zA-Z0-9._-]+$).
func componentName(s string) string {
	if s = invalidSchemaChars.ReplaceAllString(s, "_"); s == "" {
		return "_"
	}
	return s
}

// member is the object doc[name], made if missing.
func member(doc jsonObject, name string) jsonObject {
	m, _ := doc[name].(jsonObject)
	if m == nil {
		m = jsonObject{}
		doc[name] = m
	}
	return m
}

func sortedKeys(m jsonObject) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// canonical is v as JSON, object members sorted and nothing HTML-escaped: equal for equal values.
func canonical(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // values decoded from JSON: nothing fails
	return strings.TrimSuffix(b.String(), "\n")
}
