package httpx

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
)

// integerPathParams names the integer path parameters of an input type (embedded structs included).
func integerPathParams(t reflect.Type) []string {
	return taggedFields(t, func(f reflect.StructField) string {
		if f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Uint64 {
			return f.Tag.Get("path")
		}
		return ""
	})
}

// taggedFields names, in order, the fields of struct t (embedded structs included) for which name
// answers a name.
func taggedFields(t reflect.Type, name func(reflect.StructField) string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, taggedFields(f.Type, name)...)
			continue
		}
		if n := name(f); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// scalarQueryParams names the query parameters of an input type that take one value (any but a
// slice), embedded structs included.
func scalarQueryParams(t reflect.Type) []string {
	return taggedFields(t, func(f reflect.StructField) string {
		if name, _, _ := strings.Cut(f.Tag.Get("query"), ","); f.Type.Kind() != reflect.Slice {
			return name
		}
		return ""
	})
}

// singleQueryValues refuses (400) a request giving a one-value query parameter more than once
// (?status=Active&status=Failed): huma would take the first and drop the rest without a word, and
// the client would believe it had filtered on both.
func singleQueryValues(api huma.API, names []string) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		if args := humafiber.Unwrap(ctx).Context().QueryArgs(); args.Len() > 1 {
			for _, n := range names {
				if vs := args.PeekMulti(n); len(vs) > 1 {
					_ = huma.WriteErr(api, ctx, http.StatusUnprocessableEntity, "validation failed",
						&huma.ErrorDetail{Location: "query." + n, Message: fmt.Sprintf("must be given once (it was given %d times)", len(vs))})
					return
				}
			}
		}
		next(ctx)
	}
}

// hiddenEmbedded names a struct embedded without a json tag whose type is unexported, anywhere in
// t: encoding/json decodes its members, but huma neither documents nor validates them (its schema
// skips unexported fields), so the body would be served unchecked under a schema that omits them.
// Such an input is a programming error, refused when the route is registered.
func hiddenEmbedded(t reflect.Type, seen map[reflect.Type]bool) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return ""
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && !f.IsExported() && ft.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			return fmt.Sprintf("%s embeds the unexported %s, whose members huma neither documents nor validates: export it", t, ft)
		}
		if f.IsExported() || f.Anonymous {
			if hidden := hiddenEmbedded(f.Type, seen); hidden != "" {
				return hidden
			}
		}
	}
	return ""
}

// canonicalIntegers refuses an integer path parameter not written in canonical decimal: huma
// would parse /api/users/01 and /api/users/+1 as user 1, so one resource had many URLs. Such a
// value is answered as a non-numeric one is: 400, field "id", "invalid integer".
func canonicalIntegers(api huma.API, names []string) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		for _, n := range names {
			if v := ctx.Param(n); !canonicalDecimal(v) {
				_ = huma.WriteErr(api, ctx, http.StatusUnprocessableEntity, "validation failed",
					&huma.ErrorDetail{Location: "path." + n, Message: "invalid integer", Value: v})
				return
			}
		}
		next(ctx)
	}
}

// canonicalDecimal reports whether s is a non-negative integer in canonical decimal: digits only,
// no sign, no leading zero (except "0" itself).
func canonicalDecimal(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
