package dns_test

import (
	"net/netip"
	"strings"
	"testing"

	"provisioner/modules/dns"
)

// FuzzLabel: whatever a client sends, an accepted label is one valid DNS label.
func FuzzLabel(f *testing.F) {
	for _, s := range []string{"myapp", "A-B", "-x", "x-", "a.b", "ä", strings.Repeat("a", 64), ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, ok := dns.NormalizeLabel(s)
		if !ok {
			return
		}
		if len(l) < 1 || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			t.Fatalf("accepted %q as %q", s, l)
		}
	})
}

// FuzzContent: an accepted content is a public-looking dotted IPv4 address.
func FuzzContent(f *testing.F) {
	for _, s := range []string{"203.0.113.1", "127.0.0.1", "0.0.0.0", "255.255.255.255", "::1", "1.2.3", "01.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !dns.ValidContent(s) {
			return
		}
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() || a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() || s == "255.255.255.255" {
			t.Fatalf("accepted %q", s)
		}
	})
}
