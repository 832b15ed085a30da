package ratelimit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"provisioner/platform/ratelimit"
)

// TestClientKeyGroupsAnIPv6ClientByItsPrefix: every address of one /64 is one client for the
// per-IP limits (a host there picks any of its 2^64 addresses at will); IPv4 clients stay per address.
func TestClientKeyGroupsAnIPv6ClientByItsPrefix(t *testing.T) {
	same := []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:DB8:1:2:aaaa::b", "2001:db8:1:2::9"}
	for _, ip := range same {
		assert.Equal(t, "2001:db8:1:2::/64", ratelimit.ClientKey(ip, 64), ip)
	}
	assert.Equal(t, "2001:db8:1:3::/64", ratelimit.ClientKey("2001:db8:1:3::1", 64), "the next /64 is another client")
	assert.Equal(t, "2001:db8:1::/48", ratelimit.ClientKey("2001:db8:1:2::1", 48))
	assert.Equal(t, "2001:db8:1:2::1/128", ratelimit.ClientKey("2001:db8:1:2::1", 128))
	assert.Equal(t, "2001:db8:1:2::/64", ratelimit.ClientKey("2001:db8:1:2::1", 0), "out of range: the default")
	assert.Equal(t, "203.0.113.7", ratelimit.ClientKey("203.0.113.7", 64))
	assert.Equal(t, "203.0.113.7", ratelimit.ClientKey("::ffff:203.0.113.7", 64), "IPv4-mapped is IPv4")
	assert.Equal(t, "not-an-ip", ratelimit.ClientKey("not-an-ip", 64))
}
