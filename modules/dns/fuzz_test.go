package dns_test

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/idna"

	"provisioner/modules/dns"
)

// FuzzLabel: whatever a client sends, an accepted label is one valid DNS label.
func FuzzLabel(f *testing.F) {
	for _, s := range []string{"myapp", "A-B", "-x", "x-", "a.b", "ä", strings.Repeat("a", 64), "", "xn--a", "xn--0", "xn--ab-cd",
		"ab--cd", "xn--bcher-kva", "XN--MNCHEN-3YA", "xn--aaa-", "\u212Aafka"} {
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
		if len(strings.TrimSpace(s)) != len(l) { // lower-casing ASCII keeps the length; folding another letter into ASCII does not
			t.Fatalf("accepted %q as %q: not the name sent", s, l)
		}
		if len(l) >= 4 && l[2:4] == "--" {
			// RFC 5891 reserves "??--"; only a real A-label: valid Punycode that round-trips.
			u, err := idna.Registration.ToUnicode(l)
			back, err2 := idna.Registration.ToASCII(u)
			if !strings.HasPrefix(l, "xn--") || err != nil || err2 != nil || back != l || u == l {
				t.Fatalf("accepted %q as %q (reserved hyphens, not a valid A-label)", s, l)
			}
		}
	})
}

// FuzzContent: an accepted content is a dotted IPv4 address outside the classes refused (0.0.0.0/8,
// loopback, link-local, multicast, 240.0.0.0/4 with broadcast).
func FuzzContent(f *testing.F) {
	for _, s := range []string{"203.0.113.1", "127.0.0.1", "0.0.0.0", "255.255.255.255", "::1", "1.2.3", "01.2.3.4",
		"10.0.0.1", "100.64.0.1", "240.0.0.1", "192.0.2.1", "169.254.0.1", "239.255.255.255", "127.255.255.254",
		"0.1.2.3", "255.255.255.254", "223.255.255.255", "1.0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !dns.ValidContent(s, true) {
			return
		}
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() || a.String() != s || a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() ||
			a.As4()[0] == 0 || a.As4()[0] >= 240 {
			t.Fatalf("accepted %q", s)
		}
	})
}
