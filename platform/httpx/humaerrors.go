package httpx

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"

	"provisioner/platform/fault"
)

func init() {
	// The schema check must read the members the decoder fills (requestJSON matches names exactly):
	// by default huma's validator takes a case variant ("EMAIL") for a missing property, which the
	// struct never receives.
	huma.ValidateStrictCasing = true
	huma.NewErrorWithContext = func(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		return mapHumaError(hctx, status, msg, errs...)
	}
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		return mapHumaError(nil, status, msg, errs...)
	}
}

// patternRefusal reports whether a huma message refuses a value its schema's pattern or enum does
// not allow (a Resolve check of the same field, when there is one, says better what is wrong):
// "expected value to be one of …", "expected string to match pattern …", or "expected string to be <patternDescription>",
// which the formats' messages, "expected string to be RFC 5322 email" and the like, are not), and
// answers the message in our words ("must be <patternDescription>").
func patternRefusal(m string) (string, bool) {
	if strings.HasPrefix(m, "expected string to match pattern ") || strings.HasPrefix(m, "expected value to be one of ") {
		return m, true
	}
	desc, ok := strings.CutPrefix(m, "expected string to be ")
	if !ok || strings.HasPrefix(desc, "RFC ") || strings.HasPrefix(desc, "either RFC ") || strings.HasPrefix(desc, "regex: ") || desc == "base64 encoded" {
		return m, false
	}
	return "must be " + desc, true
}

// withFaultHeaders maps a domain error h returns to its Error before huma sees it: huma writes the
// headers of the error a handler returned (a fault's Retry-After) only when that error carries
// them itself, not those of the error it maps the handler's error to.
func withFaultHeaders[I, O any](h func(context.Context, *I) (*O, error)) func(context.Context, *I) (*O, error) {
	return func(ctx context.Context, in *I) (*O, error) {
		out, err := h(ctx, in)
		if _, ok := fault.As(err); ok {
			var e *Error
			if !errors.As(err, &e) {
				return out, FromError(err)
			}
		}
		return out, err
	}
}

// mapHumaError turns huma's own errors (validation, unmarshal, body size) and errors returned by
// handlers into our Error: validation is 400 with every field, internals never reach the client.
func mapHumaError(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
	if status == 0 { // schema generation asks for an example error
		return &Error{}
	}
	if status >= 500 && len(errs) == 1 {
		// A handler returned a plain error: map sentinels, log the rest with the request id.
		out := FromError(errs[0])
		if out.Status >= 500 && hctx != nil {
			slog.ErrorContext(hctx.Context(), "request failed",
				"requestId", requestIDFrom(hctx), "error", errs[0].Error())
		}
		return out
	}
	var fields []FieldError
	byPattern := map[string]bool{} // fields whose entry is the schema's pattern refusing them
	addFrom := func(field, message string, pattern bool) {
		i := slices.IndexFunc(fields, func(f FieldError) bool { return f.Field == field })
		switch {
		case i < 0:
			fields = append(fields, FieldError{Field: field, Message: message})
			byPattern[field] = pattern
		case byPattern[field] && !pattern:
			// The schema's pattern only says the value does not match; a Resolve check of the
			// same field says what is wrong (blank, the control character it holds).
			fields[i].Message, byPattern[field] = message, false
		}
		// Otherwise one entry per field: the schema's comes first; a Resolve check of the same
		// field (a common password that is also too short) adds nothing.
	}
	add := func(field, message string) { addFrom(field, message, false) }
	// A number beyond the Go type's range says what the type holds, not what the field accepts:
	// listed only for a field nothing else names (a Resolve check of the field says its own range).
	var beyondType []FieldError
	for _, err := range errs {
		var d *huma.ErrorDetail
		if errors.As(err, &d) {
			field, message := fieldName(d.Location), integralLimits(d.Message)
			pattern := false
			if m, ok := patternRefusal(message); ok {
				message, pattern = m, true
			}
			if field == "body" {
				if f, m, ok := memberMessage(d.Message); ok {
					if beyondTypeRange(m) {
						beyondType = append(beyondType, FieldError{Field: f, Message: m})
						continue
					}
					field, message = f, m
				}
			}
			if m := requiredProperty.FindStringSubmatch(d.Message); m != nil {
				// "expected required property email to be present" at "body": name the field itself.
				if field == "body" || field == "" {
					field = m[1]
				} else {
					field += "." + m[1]
				}
				message = "is required"
			}
			addFrom(field, message, pattern)
			continue
		}
		if err != nil && status < 500 {
			// The decoder's error for one member (5.5 or 1e30 in an integer field) goes under it.
			f, m, ok := memberMessage(err.Error())
			switch {
			case ok && beyondTypeRange(m):
				beyondType = append(beyondType, FieldError{Field: f, Message: m})
			case ok:
				add(f, m)
			default:
				add("body", err.Error())
			}
		}
	}
	for _, f := range beyondType {
		if r := documentedRange(hctx, f.Field); r != "" {
			f.Message = r
		}
		add(f.Field, f.Message)
	}
	switch status {
	case http.StatusUnprocessableEntity:
		status = http.StatusBadRequest
		msg = "Validation failed"
	case http.StatusBadRequest:
		if msg == "request body is required" { // huma's, for a required body that is empty
			msg = "Request body is required"
			fields = []FieldError{{Field: "body", Message: "is required"}}
		} else if strings.Contains(strings.ToLower(msg), "unmarshal") || strings.Contains(strings.ToLower(msg), "json") {
			msg = "Malformed JSON body"
		} else if msg == "" || len(fields) > 0 {
			msg = "Validation failed"
		}
	case http.StatusRequestEntityTooLarge:
		msg = "Request body is larger than 1 MiB"
	case http.StatusUnsupportedMediaType:
		msg = "Unsupported Content-Type: send application/json"
		fields = nil
	}
	if status == http.StatusInternalServerError {
		return NewError(http.StatusInternalServerError, "An unexpected error occurred")
	}
	e := NewError(status, msg)
	e.Errors = fields
	return e
}

// exponentNumber is a number huma formatted with %v: a float64 of 1 MiB prints as 1.048576e+06.
var exponentNumber = regexp.MustCompile(`-?[0-9]+(?:\.[0-9]+)?e[+-][0-9]+`)

// integralLimits writes the whole numbers of a validation message as integers ("expected number >=
// 1048576", not 1.048576e+06); other numbers are left as they are.
func integralLimits(msg string) string {
	return exponentNumber.ReplaceAllStringFunc(msg, func(n string) string {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1e21 {
			return n
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	})
}

// memberMessage splits a decoding error about one member, as decodeError words it ("\"ttl\" must
// be an integer"), into the field and what is wrong with it. huma keeps only the text of the
// errors of its validation pass, hence the parsing.
func memberMessage(msg string) (field, message string, ok bool) {
	m := quotedMember.FindStringSubmatch(msg)
	if m == nil {
		return "", "", false
	}
	field, err := strconv.Unquote(m[1])
	if err != nil || field == "" || strings.ContainsRune(field, 0) {
		return "", "", false
	}
	return field, m[2], true
}

var quotedMember = regexp.MustCompile(`^("(?:[^"\\]|\\.)*") (.+)$`)

// beyondTypeRange reports whether a decoding message is about a number beyond what the field's
// Go type (or a float64) holds.
func beyondTypeRange(message string) bool {
	return strings.HasPrefix(message, "must be an integer from ") || message == "is a number out of range"
}

const bodyTypeKey = "bodyType"

// bodyType is the Go type of the Body field of an operation's input type, if it has one.
func bodyType(t reflect.Type) (reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	if f, ok := t.FieldByName("Body"); ok {
		return f.Type, true
	}
	return nil, false
}

// documentedRange words, for a number beyond what an integer field holds (1e308, 1e400,
// 9223372036854775808), the range the field documents: its minimum and maximum tags within its
// Go type's range ("must be an integer from 1048576 to 9223372036854775807"), not the Go type's
// alone nor "a number out of range". "" when field (huma's notation, "items[3].size") names no
// integer member of the operation's body.
func documentedRange(hctx huma.Context, field string) string {
	if hctx == nil {
		return ""
	}
	op := hctx.Operation()
	if op == nil {
		return ""
	}
	t, _ := op.Metadata[bodyTypeKey].(reflect.Type)
	f, ok := memberField(t, field)
	if !ok {
		return ""
	}
	ft := f.Type
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	// An element of a list ("list[1]") has its type's range; the tags bound the list's field.
	tags := true
	for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array {
		ft, tags = ft.Elem(), false
	}
	if !tags && !strings.HasSuffix(field, "]") {
		return ""
	}
	var lo, hi *big.Float
	switch ft.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lo = new(big.Float).SetInt64(int64(-1) << (ft.Bits() - 1))
		hi = new(big.Float).SetInt64(int64(uint64(1)<<(ft.Bits()-1) - 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		lo = new(big.Float)
		hi = new(big.Float).SetUint64(math.MaxUint64 >> (64 - ft.Bits()))
	default:
		return ""
	}
	if m, err := strconv.ParseFloat(f.Tag.Get("minimum"), 64); err == nil && tags {
		if b := new(big.Float).SetFloat64(math.Ceil(m)); b.Cmp(lo) > 0 {
			lo = b
		}
	}
	if m, err := strconv.ParseFloat(f.Tag.Get("maximum"), 64); err == nil && tags {
		if b := new(big.Float).SetFloat64(math.Floor(m)); b.Cmp(hi) < 0 {
			hi = b
		}
	}
	return "must be an integer from " + lo.Text('f', 0) + " to " + hi.Text('f', 0)
}

// memberField finds the struct field that the JSON member at field ("a.b[3].c") decodes into,
// within t: members match json names exactly (requestJSON), embedded structs are looked into.
func memberField(t reflect.Type, field string) (reflect.StructField, bool) {
	var found reflect.StructField
	if t == nil || field == "" {
		return found, false
	}
	for _, name := range strings.Split(field, ".") {
		name, _, _ = strings.Cut(name, "[")
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return found, false
		}
		f, ok := jsonMember(t, name)
		if !ok {
			return found, false
		}
		found, t = f, f.Type
		// An index ("list[2]") goes into the element type, which the loop above reaches.
	}
	return found, true
}

// jsonMember is the field of struct t whose JSON name is name, embedded structs included.
func jsonMember(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if inner, ok := jsonMember(et, name); ok {
					return inner, true
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

var requiredProperty = regexp.MustCompile(`^expected required property (\S+) to be present$`)

// fieldName turns huma's "body.items[3].name" or "query.page" into "items[3].name" or "page".
func fieldName(loc string) string {
	for _, p := range []string{"body.", "query.", "path.", "header."} {
		if strings.HasPrefix(loc, p) {
			return strings.TrimPrefix(loc, p)
		}
	}
	return loc
}

func requestIDFrom(hctx huma.Context) (id string) {
	defer func() { _ = recover() }() // not a Fiber context: no id
	if fc := humafiber.Unwrap(hctx); fc != nil {
		if id, ok := fc.Locals(requestIDKey).(string); ok {
			return id
		}
	}
	return ""
}
