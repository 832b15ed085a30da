package dns

import (
	"net/netip"
	"regexp"
	"strings"

	"provisioner/platform/httpx"
)

var labelRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// NormalizeLabel lower-cases a label and checks it is one DNS label: [a-z0-9-], 1–63 characters,
// no hyphen at either end.
func NormalizeLabel(s string) (string, bool) {
	l := strings.ToLower(strings.TrimSpace(s))
	return l, labelRe.MatchString(l)
}

// ValidContent reports whether s is a dotted IPv4 address a public A record may point to: not
// unspecified, loopback, link-local, multicast or broadcast.
func ValidContent(s string) bool {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || a.String() != s {
		return false
	}
	return !(a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() ||
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255}))
}

// ValidTTL is 1 (automatic) or 60–86400.
func ValidTTL(ttl int) bool { return ttl == 1 || (ttl >= 60 && ttl <= 86400) }

// Messages of the field checks, shared by validate and recordBody.Resolve.
const (
	msgLabel   = "must be one DNS label: a-z, 0-9 and '-', 1–63 characters, no hyphen at either end"
	msgContent = "must be a public dotted IPv4 address (not unspecified, loopback, link-local, multicast or broadcast)"
	msgTTL     = "must be 1 (automatic) or between 60 and 86400"
)

// validate checks a create request after defaults, listing every bad field.
func validate(label, content string, ttl int) (string, error) {
	var fields []httpx.FieldError
	l, ok := NormalizeLabel(label)
	if !ok {
		fields = append(fields, httpx.FieldError{Field: "label", Message: msgLabel})
	}
	if content == "" {
		fields = append(fields, httpx.FieldError{Field: "content", Message: "is required (no Dns:DefaultContent is configured)"})
	} else if !ValidContent(content) {
		fields = append(fields, httpx.FieldError{Field: "content", Message: msgContent})
	}
	if !ValidTTL(ttl) {
		fields = append(fields, httpx.FieldError{Field: "recordTtl", Message: msgTTL})
	}
	if len(fields) > 0 {
		return "", httpx.BadRequest("Validation failed", fields...)
	}
	return l, nil
}
