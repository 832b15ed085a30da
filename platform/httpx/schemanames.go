package httpx

import (
	"reflect"
	"regexp"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// schemaNamer is huma's default namer with the module's name kept for types of modules (two
// modules may both have a View), and only characters OpenAPI allows.
func schemaNamer(t reflect.Type, hint string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	if name == "" {
		return invalidSchemaChars.ReplaceAllString(huma.DefaultSchemaNamer(t, hint), "")
	}
	if t.PkgPath() != "" && !strings.Contains(name, "[") {
		name = t.PkgPath() + "." + name
	}
	name = strings.ReplaceAll(name, "[]", "List[")
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '[' || r == ']' || r == '*' || r == ',' }) {
		dot := strings.LastIndex(part, ".")
		base := part[dot+1:]
		if dot > 0 && strings.Contains(part[:dot], "/modules/") {
			mod := part[strings.LastIndex(part[:dot], "/")+1 : dot]
			if !strings.HasPrefix(strings.ToLower(base), mod) {
				base = mod + upperFirst(base)
			}
		}
		b.WriteString(upperFirst(base))
	}
	return invalidSchemaChars.ReplaceAllString(b.String(), "")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

var invalidSchemaChars = regexp.MustCompile(`[^a-zA-Z0-9._-]`)
