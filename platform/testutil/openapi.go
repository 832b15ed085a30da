package testutil

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// InlineOpenAPI returns the OpenAPI document raw with every $ref to a shared response, header or
// parameter (#/components/responses/…, headers/…, parameters/…) replaced by what it refers to, a
// description given next to the $ref overriding the component's: what each operation answers,
// written out where huma writes it. References to schemas stay.
func InlineOpenAPI(t testing.TB, raw []byte) []byte {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	var inline func(v any, depth int) any
	inline = func(v any, depth int) any {
		require.Less(t, depth, 64, "a $ref cycle")
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && sharedRef(ref) {
				target := resolvePointer(t, doc, ref)
				out := inline(target, depth+1).(map[string]any)
				if d, ok := v["description"]; ok {
					out["description"] = d
				}
				return out
			}
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[k] = inline(e, depth+1)
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = inline(e, depth+1)
			}
			return out
		}
		return v
	}
	out, err := json.Marshal(inline(doc, 0))
	require.NoError(t, err)
	return out
}

func sharedRef(ref string) bool {
	for _, kind := range []string{"responses", "headers", "parameters"} {
		if strings.HasPrefix(ref, "#/components/"+kind+"/") {
			return true
		}
	}
	return false
}

// resolvePointer returns the object at the JSON pointer of ref ("#/components/responses/429").
func resolvePointer(t testing.TB, doc map[string]any, ref string) map[string]any {
	t.Helper()
	var cur any = doc
	for _, token := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		require.True(t, ok, "%s: %q is not in an object", ref, token)
		cur, ok = m[token]
		require.True(t, ok, "%s: no %q", ref, token)
	}
	out, ok := cur.(map[string]any)
	require.True(t, ok, "%s is not an object", ref)
	return out
}
