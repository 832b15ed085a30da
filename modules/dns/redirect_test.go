package dns_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

// TestARedirectedDeleteIsNotADeletion: a DELETE answered with a redirect (a proxy, a moved
// address) deleted nothing. Followed, the 301 turned it into a GET of the record, whose 200 envelope
// counted as the deletion: the record was Revoked while the provider still served it. A 3xx is a
// failure like a 5xx: the record stays Revoking (502) and the finisher deletes it once the provider
// answers the DELETE itself.
func TestARedirectedDeleteIsNotADeletion(t *testing.T) {
	fake := cloudflaretest.New("zone123", token, "example.com")
	t.Cleanup(fake.Close)
	target, err := url.Parse(fake.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var redirect atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if redirect.Load() && r.Method == http.MethodDelete {
			http.Redirect(w, r, r.URL.RequestURI(), http.StatusMovedPermanently)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	a, _ := setup(t, map[string]any{"Dns:BaseUrl": front.URL})
	u := a.Register(t)
	got := createActive(t, a, u.Token)
	require.Contains(t, fake.Records(), got.ProviderRecordID)

	redirect.Store(true)
	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	assert.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	r.Decode(t, &got)
	assert.Equal(t, "Revoking", got.Status)
	assert.Contains(t, got.ErrorMessage, "301")
	require.Contains(t, fake.Records(), got.ProviderRecordID, "the record is still at the provider")

	redirect.Store(false)
	assert.Equal(t, "Revoked", retryNow(t, a, got.ID))
	assert.NotContains(t, fake.Records(), got.ProviderRecordID, "the finisher's retry deleted it")
}
