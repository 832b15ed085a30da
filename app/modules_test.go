package app_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app"
	"provisioner/app/apptest"
)

// TestEveryOpenAPITagIsDescribed: the document describes each tag its operations use (the
// descriptions come from the platform and from each module's descriptor), and every tag a module
// describes is one its operations use.
func TestEveryOpenAPITagIsDescribed(t *testing.T) {
	a := apptest.Start(t)
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc struct {
		Tags []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tags"`
	}
	require.NoError(t, json.Unmarshal(r.Raw, &doc))
	used := map[string]bool{}
	for _, tag := range doc.Tags {
		used[tag.Name] = true
		assert.NotEmpty(t, tag.Description, "tag %q has no description", tag.Name)
	}
	for _, m := range app.Modules {
		for name := range m.Tags {
			assert.True(t, used[name], "module %s describes tag %q, which no operation uses", m.Name, name)
		}
	}
}
