package app_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// platformLayers are the platform's packages from the bottom up (docs/architecture.md): a
// package imports only packages of lower layers. Every platform package is listed, so a new one
// is placed on purpose.
var platformLayers = [][]string{
	{"fault", "redact", "emailaddr", "docs", "summary", "coherent", "reqctx", "paging", "ipaddr", "displaytext"},
	{"secrets", "outbound"},
	{"config"},
	{"redisx", "mail", "db", "ratelimit", "audit", "module"},
	{"provision"},
	{"httpx"},
	{"authn", "idempotency"},
	{"ops"},
}

// platformTestHelpers may import any platform package (never app or a module).
var platformTestHelpers = []string{"testutil", "provision/provisiontest"}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// ourPackages lists the module's packages with their imports of other packages of ours.
func ourPackages(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "provisioner/...").Output()
	require.NoError(t, err, "go list")
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, "provisioner/")
		p.Imports, p.TestImports, p.XTestImports = ours(p.Imports), ours(p.TestImports), ours(p.XTestImports)
		pkgs = append(pkgs, p)
	}
	require.Greater(t, len(pkgs), 20)
	return pkgs
}

func ours(imports []string) []string {
	var out []string
	for _, i := range imports {
		if rest, ok := strings.CutPrefix(i, "provisioner/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

// layerOf is the layer of the platform package path ("platform/db"), -1 for a test helper; ok is
// false for one that is not listed.
func layerOf(path string) (layer int, ok bool) {
	name := strings.TrimPrefix(path, "platform/")
	for _, h := range platformTestHelpers {
		if name == h {
			return -1, true
		}
	}
	for i, layer := range platformLayers {
		for _, n := range layer {
			if n == name {
				return i, true
			}
		}
	}
	return 0, false
}

// TestPlatformLayers: a platform package imports only packages of lower layers, and neither app nor
// a module; its tests may import any platform package, never app or a module (a test that needs the
// whole service lives under app/).
func TestPlatformLayers(t *testing.T) {
	for _, p := range ourPackages(t) {
		if !strings.HasPrefix(p.ImportPath, "platform/") {
			continue
		}
		layer, ok := layerOf(p.ImportPath)
		if !assert.True(t, ok, "%s is in no layer: add it to platformLayers and docs/architecture.md", p.ImportPath) {
			continue
		}
		for _, i := range p.Imports {
			to, known := layerOf(i)
			switch {
			case !strings.HasPrefix(i, "platform/"):
				assert.Fail(t, "platform imports outside the platform", "%s imports %s", p.ImportPath, i)
			case !known:
			case layer >= 0 && to < 0:
				assert.Fail(t, "platform imports a test helper", "%s imports %s", p.ImportPath, i)
			case layer >= 0 && to >= layer:
				assert.Fail(t, "platform imports against its layers", "%s (layer %d) imports %s (layer %d)", p.ImportPath, layer, i, to)
			}
		}
		for _, i := range append(p.TestImports, p.XTestImports...) {
			assert.False(t, strings.HasPrefix(i, "app") || strings.HasPrefix(i, "modules/"),
				"the tests of %s import %s: a test of the whole service lives under app/", p.ImportPath, i)
		}
	}
}

// TestModulesImportNoOtherModule: a module's packages (its tests included) import the platform and
// their own module, never another module; its non-test code never imports app.
func TestModulesImportNoOtherModule(t *testing.T) {
	checked := 0
	for _, p := range ourPackages(t) {
		name, ok := strings.CutPrefix(p.ImportPath, "modules/")
		if !ok {
			continue
		}
		own := "modules/" + strings.Split(name, "/")[0]
		for _, i := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
			if strings.HasPrefix(i, "modules/") {
				assert.True(t, i == own || strings.HasPrefix(i, own+"/"), "%s imports another module: %s", p.ImportPath, i)
			}
		}
		for _, i := range p.Imports {
			assert.False(t, i == "app" || strings.HasPrefix(i, "app/"), "%s imports %s", p.ImportPath, i)
		}
		checked++
	}
	assert.Greater(t, checked, 5)
}
