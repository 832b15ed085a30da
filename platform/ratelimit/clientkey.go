package ratelimit

import "net/netip"

// DefaultIPv6Prefix is the length of the prefix that keys an IPv6 client's per-IP limits: one
// /64 is what a single subscriber or host is given, and takes any address in it at will.
const DefaultIPv6Prefix = 64

// ClientKey is the key of every per-IP limit for the client address ip: an IPv4 address itself (an
// IPv4-mapped IPv6 address as IPv4), an IPv6 address as its prefix of ipv6Prefix bits
// ("2001:db8:1:2::/64"; DefaultIPv6Prefix when ipv6Prefix is not between 1 and 128). What is not
// an address is returned as it is.
func ClientKey(ip string, ipv6Prefix int) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	return AddrKey(a, ipv6Prefix)
}

// AddrKey is ClientKey of a parsed address.
func AddrKey(a netip.Addr, ipv6Prefix int) string {
	p := ClientPrefix(a, ipv6Prefix)
	if p.Addr().Is4() {
		return p.Addr().String()
	}
	return p.String()
}

// ClientPrefix is the client a counts as: an IPv4 address as itself (a /32; an IPv4-mapped IPv6
// address as IPv4), an IPv6 address as its prefix of ipv6Prefix bits (DefaultIPv6Prefix when
// ipv6Prefix is not between 1 and 128).
func ClientPrefix(a netip.Addr, ipv6Prefix int) netip.Prefix {
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	if ipv6Prefix < 1 || ipv6Prefix > 128 {
		ipv6Prefix = DefaultIPv6Prefix
	}
	p, _ := a.Prefix(ipv6Prefix)
	return p
}
