package dns_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReservedLabelsAreRefused: the service names of Dns:ReservedLabels (www, mail, login…) are
// nobody's to take, in any case: 409 saying the name is reserved, and nothing reaches the provider.
// The list is configuration: another list frees www and reserves its own names.
func TestReservedLabelsAreRefused(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	for _, l := range []string{"www", "MAIL", "login", "api", "autodiscover", "ns1"} {
		r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
		require.Equal(t, http.StatusConflict, r.Status, "%s: %s", l, r.Raw)
		assert.Contains(t, r.Env.Message, "reserved", l)
	}
	admin := a.AdminToken(t)
	r := a.Post("/api/dns/records", admin, map[string]any{"label": "www", "userId": u.ID})
	assert.Equal(t, http.StatusConflict, r.Status, "an administrator's create for a user too: %s", r.Raw)
	assert.Zero(t, fake.Calls(), "nothing reached the provider")

	b, _ := setup(t, map[string]any{"Dns:ReservedLabels": []string{"billing"}})
	v := b.Register(t)
	assert.Equal(t, http.StatusConflict, b.Post("/api/me/dns", v.Token, map[string]any{"label": "billing"}).Status)
	assert.Equal(t, http.StatusCreated, b.Post("/api/me/dns", v.Token, map[string]any{"label": "www"}).Status)
}

// TestPrivateContentIsRefused: a record in the company's zone may not point into a private or
// shared network (RFC 1918, 100.64.0.0/10, 198.18.0.0/15): 400 naming content, unless
// Dns:AllowPrivateContent.
func TestPrivateContentIsRefused(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	for _, ip := range []string{"10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1", "100.64.0.1", "100.127.0.1", "198.18.0.1", "198.19.1.1"} {
		r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label(), "content": ip})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", ip, r.Raw)
		assert.Equal(t, []string{"content"}, r.Fields(), ip)
		assert.Contains(t, string(r.Raw), "Dns:AllowPrivateContent", ip)
	}
	assert.Zero(t, fake.Calls(), "nothing reached the provider")

	b, _ := setup(t, map[string]any{"Dns:AllowPrivateContent": true})
	v := b.Register(t)
	r := b.Post("/api/me/dns", v.Token, map[string]any{"label": label(), "content": "10.1.2.3"})
	assert.Equal(t, http.StatusCreated, r.Status, "allowed by configuration: %s", r.Raw)
}
