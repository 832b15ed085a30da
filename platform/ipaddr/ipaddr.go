// Package ipaddr is the address rules modules share: which IPv4 addresses a name served to the
// public may point at (a host address, and whether it is in a private or shared range).
package ipaddr

import "net/netip"

// HostIPv4 reports whether s is an IPv4 address in dotted-decimal form that is routable as a host
// address: not in 0.0.0.0/8 ("this network", 0.0.0.0 included), loopback, link-local, multicast or
// 240.0.0.0/4 (reserved, 255.255.255.255 included). Private ranges are allowed (PrivateIPv4).
func HostIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || a.String() != s {
		return false
	}
	b := a.As4()
	return !(b[0] == 0 || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || b[0] >= 240)
}

// privateRanges are RFC 1918's private networks, the shared address space (RFC 6598) and the
// benchmarking range (RFC 2544).
var privateRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("198.18.0.0/15")}

// PrivateIPv4 reports whether the IPv4 address s is in a private, shared or benchmarking range.
func PrivateIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return false
	}
	for _, p := range privateRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
