package app_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestPerIpLimitsCountAnIPv6ClientByItsPrefix: a host given a /64 may send from any of its 2^64
// addresses; every per-IP limit counts them as one client (Server:Ipv6LimitPrefix), while the
// next /64 and IPv4 clients keep limits of their own.
func TestPerIpLimitsCountAnIPv6ClientByItsPrefix(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"Server:TrustedProxies": []string{"127.0.0.1"},
		"RateLimit:PerIp": "3-M", "RateLimit:Register": "2-M"}))
	get := func(from string) int {
		return a.Do(apptest.Request{Method: http.MethodGet, Path: "/api/engines", Header: map[string]string{"X-Forwarded-For": from}}).Status
	}
	codes := []int{get("2001:db8:1:2::1"), get("2001:db8:1:2::2"), get("2001:db8:1:2:ffff:ffff:ffff:3"), get("2001:db8:1:2::4")}
	assert.Equal(t, []int{200, 200, 200, 429}, codes, "RateLimit:PerIp: four addresses of one /64 are one client")
	assert.Equal(t, http.StatusOK, get("2001:db8:1:3::1"), "the next /64 is another client")
	assert.Equal(t, http.StatusOK, get("203.0.113.7"))

	register := func(from string) *apptest.Resp {
		return a.Do(apptest.Request{Method: http.MethodPost, Path: "/api/auth/register", Header: map[string]string{"X-Forwarded-For": from},
			Body: map[string]any{"fullName": "Six", "email": "six-" + testutil.RandomSuffix() + "@example.test", "password": "Tr0ub4dor&3-" + testutil.RandomSuffix()}})
	}
	statuses := []int{register("2001:db8:5:5::1").Status, register("2001:db8:5:5::2").Status}
	r := register("2001:db8:5:5::3")
	assert.Equal(t, []int{201, 201, 429}, append(statuses, r.Status), "RateLimit:Register: %.120s", r.Raw)
	assert.Contains(t, r.Env.Message, "Register")
}
