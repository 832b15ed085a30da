package dns

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"provisioner/platform/fault"
	"provisioner/platform/ipaddr"
)

var labelRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// NormalizeLabel lower-cases a label and checks it is one DNS label: [a-z0-9-], 1–63 characters,
// no hyphen at either end, and no hyphens in the third and fourth positions (reserved by RFC 5891
// §4.2.3.1) unless it is an IDN A-label ("xn--…") that decodes to a valid internationalised label
// and encodes back to itself. Only ASCII letters are lower-cased: Unicode case folding would turn
// a non-ASCII letter (the Kelvin sign U+212A) into an ASCII one ("k"), a name never sent.
func NormalizeLabel(s string) (string, bool) {
	l := strings.TrimSpace(s)
	ascii := strings.IndexFunc(l, func(r rune) bool { return r >= utf8.RuneSelf }) < 0
	l = strings.ToLower(l)
	if !ascii || !labelRe.MatchString(l) {
		return l, false
	}
	if len(l) >= 4 && l[2:4] == "--" {
		return l, validALabel(l)
	}
	return l, true
}

// validALabel reports whether l is an A-label under the IDNA registration rules: "xn--" followed
// by valid Punycode of a permitted Unicode label, whose encoding is l itself.
func validALabel(l string) bool {
	if !strings.HasPrefix(l, "xn--") {
		return false
	}
	u, err := idna.Registration.ToUnicode(l)
	if err != nil || u == l {
		return false
	}
	back, err := idna.Registration.ToASCII(u)
	return err == nil && back == l
}

// ValidContent reports whether s may be a record's content (ContentProblem finds nothing).
func ValidContent(s string, allowPrivate bool) bool { return ContentProblem(s, allowPrivate) == "" }

// ContentProblem is what is wrong with s as a record's content, "" when nothing: a dotted-decimal
// host IPv4 (ipaddr.HostIPv4) outside the private and shared ranges unless allowPrivate, so a name
// in the company's zone cannot point into an internal network (DNS rebinding).
func ContentProblem(s string, allowPrivate bool) string {
	if !ipaddr.HostIPv4(s) {
		return msgContent
	}
	if !allowPrivate && ipaddr.PrivateIPv4(s) {
		return msgPrivate
	}
	return ""
}

// ValidTTL is 1 (automatic) or 60–86400.
func ValidTTL(ttl int) bool { return ttl == 1 || (ttl >= 60 && ttl <= 86400) }

// Messages of the field checks, shared by validate and RecordBody.Resolve.
const (
	msgLabel = "must be one DNS label: a-z, 0-9 and '-', 1–63 characters, no hyphen at either end, " +
		"and '--' in the third and fourth characters only in a valid IDN A-label (xn--…)"
	msgContent = "must be an IPv4 address in dotted-decimal form, other than 0.0.0.0/8 (this network, 0.0.0.0 included), " +
		"127.0.0.0/8 (loopback), 169.254.0.0/16 (link-local), 224.0.0.0/4 (multicast) and 240.0.0.0/4 (reserved, " +
		"255.255.255.255 included)"
	msgPrivate = "must not be a private or shared address (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, " +
		"198.18.0.0/15) unless Dns:AllowPrivateContent is set"
	msgTTL = "must be 1 (automatic) or between 60 and 86400"
)

// fieldProblems is the one check of a record's fields beyond the schema, for the fields given (nil:
// not given), for RecordBody.Resolve and validate. An empty content is refused with empty.
func fieldProblems(label, content *string, ttl *int, allowPrivate bool, empty string) []fault.FieldError {
	var fields []fault.FieldError
	if _, ok := NormalizeLabel(orDefault(label, "")); label != nil && !ok {
		fields = append(fields, fault.FieldError{Field: "label", Message: msgLabel})
	}
	if msg := ContentProblem(orDefault(content, ""), allowPrivate); content != nil && *content == "" {
		fields = append(fields, fault.FieldError{Field: "content", Message: empty})
	} else if content != nil && msg != "" {
		fields = append(fields, fault.FieldError{Field: "content", Message: msg})
	}
	if ttl != nil && !ValidTTL(*ttl) {
		fields = append(fields, fault.FieldError{Field: "recordTtl", Message: msgTTL})
	}
	return fields
}

// orDefault is *p, or d when p is nil.
func orDefault[T any](p *T, d T) T {
	if p == nil {
		return d
	}
	return *p
}

// validate checks a create request after defaults (fieldProblems). omittable: content was given
// while Dns:DefaultContent is set, so an empty one is refused as such, not as a missing default.
func validate(label, content string, omittable bool, ttl int, allowPrivate bool) (string, error) {
	empty := "is required (no Dns:DefaultContent is configured)"
	if omittable {
		empty = "must not be empty: omit it to use the default (Dns:DefaultContent)"
	}
	if fields := fieldProblems(&label, &content, &ttl, allowPrivate, empty); len(fields) > 0 {
		return "", fault.Invalid("Validation failed", fields...)
	}
	l, _ := NormalizeLabel(label)
	return l, nil
}
