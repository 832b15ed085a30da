package httpx

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// requestJSON is the JSON format of the API. huma decodes a body twice (into an `any` for the schema,
// then into the struct); both passes here read the same members: names match exactly, a name given
// twice and invalid UTF-8 are refused, and the validation pass refuses a NUL in any string (which
// PostgreSQL text cannot hold). Responses are encoded as huma encodes them.
var requestJSON = huma.Format{
	Marshal:   huma.DefaultJSONFormat.Marshal,
	Unmarshal: decodeJSON,
}

// decodeOptions spell out what json/v2 already does by default, so no default can change it, and
// decode whole numbers written with a fraction or an exponent into integer fields (wholeNumbers).
var decodeOptions = json.JoinOptions(
	json.MatchCaseInsensitiveNames(false),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
	json.WithUnmarshalers(json.UnmarshalFromFunc(wholeNumbers)),
)

// DecodeStrictly decodes a JSON body into v as huma's operations decode theirs (see decodeOptions),
// and refuses members v has no field for (what their schemas' additionalProperties: false refuse).
// For a route that reads a body itself. Its errors are not worded for the client.
func DecodeStrictly(data []byte, v any) error {
	return json.Unmarshal(data, v, decodeOptions, json.RejectUnknownMembers(true))
}

// errNUL is the message for a NUL character in a body.
const errNUL = "must not contain NUL characters (\\u0000)"

func decodeJSON(data []byte, v any) error {
	if withoutFields(reflect.TypeOf(v)) {
		// A body with nothing to decode (struct{ _ struct{} }, an optional body the schema alone
		// describes) is one json/v2 refuses as a target; its syntax and strings are still checked.
		var discard any
		v = &discard
	}
	if err := json.Unmarshal(data, v, decodeOptions); err != nil {
		return decodeError(err)
	}
	if p, ok := v.(*any); ok {
		if where, found := holdsNUL(*p, ""); found {
			if where == "" {
				return errors.New("the body " + errNUL)
			}
			return fmt.Errorf("%s %s", where, errNUL)
		}
	}
	return nil
}

// withoutFields reports whether t, behind any pointers, is a struct with no exported field.
func withoutFields(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			return false
		}
	}
	return true
}

// decodeError words a decoding error for the client: what is wrong and where, without the offset
// arithmetic or the Go type names of json/v2's messages.
func decodeError(err error) error {
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	var num *integerError
	switch {
	case errors.As(err, &num) && errors.As(err, &sem):
		return fmt.Errorf("%s %s", memberAt(string(sem.JSONPointer)), num.message)
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syn):
		return fmt.Errorf("duplicate member %s: a name may appear only once in an object", memberAt(string(syn.JSONPointer)))
	case errors.As(err, &syn) && strings.Contains(syn.Err.Error(), "UTF-8"):
		return errors.New("invalid UTF-8 in a string: the body must be UTF-8 text")
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	case errors.As(err, &sem):
		where := memberAt(string(sem.JSONPointer))
		switch sem.JSONKind {
		case '{':
			return fmt.Errorf("%s cannot be an object", where)
		case '[':
			return fmt.Errorf("%s cannot be an array", where)
		case 't', 'f':
			return fmt.Errorf("%s cannot be a boolean", where)
		case '0':
			if errors.Is(err, strconv.ErrRange) { // beyond float64
				return fmt.Errorf("%s is a number out of range", where)
			}
			return fmt.Errorf("%s cannot be a number", where)
		case '"':
			return fmt.Errorf("%s cannot be a string", where)
		}
		return fmt.Errorf("%s has a value of the wrong type", where)
	}
	return errors.New("malformed JSON")
}

// memberAt turns a JSON pointer ("/items/3/name") into the field notation of validation errors
// ("items[3].name"), quoted; the empty pointer is the body itself.
func memberAt(ptr string) string {
	if ptr == "" {
		return "the body"
	}
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.WriteString(tok)
	}
	return strconv.Quote(b.String())
}

// holdsNUL reports the first place (field notation, "" for the body itself) where a string or a
// member name of v, as decoded into an `any`, holds a NUL character.
func holdsNUL(v any, at string) (string, bool) {
	switch t := v.(type) {
	case string:
		if !strings.ContainsRune(t, 0) {
			return "", false
		}
		if at == "" {
			return "", true
		}
		return strconv.Quote(at), true
	case map[string]any:
		for k, e := range t {
			name := k
			if at != "" {
				name = at + "." + k
			}
			if strings.ContainsRune(k, 0) {
				return strconv.Quote(name), true
			}
			if where, ok := holdsNUL(e, name); ok {
				return where, true
			}
		}
	case []any:
		for i, e := range t {
			if where, ok := holdsNUL(e, at+"["+strconv.Itoa(i)+"]"); ok {
				return where, true
			}
		}
	}
	return "", false
}
