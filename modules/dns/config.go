package dns

import (
	"fmt"
	"slices"
	"strings"

	"provisioner/platform/config"
)

// Config is the dns module's configuration section, Dns:* (the DNS cell, Cloudflare's v4 API),
// its keys documented in Settings.
type Config struct {
	BaseUrl             string   `koanf:"baseurl"`
	ZoneId              string   `koanf:"zoneid"`
	ZoneName            string   `koanf:"zonename"`
	CellSubdomain       string   `koanf:"cellsubdomain"`
	ApiToken            string   `koanf:"apitoken"`
	DefaultContent      string   `koanf:"defaultcontent"`
	RecordTtl           int      `koanf:"recordttl"`
	Proxied             bool     `koanf:"proxied"`
	MaxRecordsPerUser   int      `koanf:"maxrecordsperuser"`
	TimeoutSeconds      int      `koanf:"timeoutseconds"`
	OutboundRate        string   `koanf:"outboundrate"`
	ReservedLabels      []string `koanf:"reservedlabels"`
	AllowPrivateContent bool     `koanf:"allowprivatecontent"`
}

// DefaultReservedLabels are the service names kept out of users' reach by default.
var DefaultReservedLabels = []string{"www", "mail", "smtp", "imap", "pop", "pop3", "ftp", "api", "admin", "login", "auth",
	"sso", "id", "account", "accounts", "autodiscover", "autoconfig", "webmail", "ns1", "ns2", "ns3", "ns4", "mx",
	"status", "docs", "app", "dashboard"}

// reserved reports whether label (normalised) is one of ReservedLabels.
func (d Config) reserved(label string) bool {
	return slices.ContainsFunc(d.ReservedLabels, func(r string) bool { return strings.EqualFold(strings.TrimSpace(r), label) })
}

// Settings declares the section: its defaults and the documentation of its keys.
var Settings = &config.Section[Config]{
	Key: "Dns",
	Defaults: Config{BaseUrl: "https://api.cloudflare.com/client/v4", RecordTtl: 1, MaxRecordsPerUser: 5,
		TimeoutSeconds: 10, OutboundRate: "200-M", ReservedLabels: DefaultReservedLabels},
	Doc: map[string]string{
		"BaseUrl": "the Cloudflare API (an absolute http(s) URL)",
		"ZoneName": "e.g. example.com; fqdn = name.ZoneName. Required (a DNS name of two labels or more) once `Dns:ZoneId` " +
			"and `Dns:ApiToken` are set: the process does not start without it",
		"CellSubdomain": "when set, records are label.CellSubdomain (fqdn label.CellSubdomain.ZoneName); once the cell is " +
			"configured it must be DNS labels without the zone's name (`cell`, not `cell.example.com`) leaving room for a label " +
			"(253 characters in all), or the process does not start",
		"ApiToken": "secret: set it in the environment (Dns__ApiToken)",
		"DefaultContent": "IPv4 used when a request gives no content; when set, it must be an address a record may have " +
			"(as `content`), or the process does not start",
		"RecordTtl": "1 = automatic, or 60..86400",
		"TimeoutSeconds": "bounds each provider call whole (lookup, create or delete: its tries and the waits between them, " +
			"from its first try); a call that timed out is not tried again within it",
		"OutboundRate":        "our own provider call budget, shared by replicas (provider: 1,200 per 5 min); waiting calls are served a user at a time in turn",
		"ReservedLabels":      "labels no record may take (409 `The name … is reserved`); each must be a DNS label, or the process does not start",
		"AllowPrivateContent": "lets `content` be a private or shared address (10/8, 172.16/12, 192.168/16, 100.64/10, 198.18/15)",
	},
}

// Enabled reports whether the DNS cell is configured: a zone id, an API token and a base URL.
func (d Config) Enabled() bool { return d.ZoneId != "" && d.ApiToken != "" && d.BaseUrl != "" }

// Validate implements config.Validator.
func (d Config) Validate() error {
	if err := config.OptionalURL("Dns:BaseUrl", d.BaseUrl, "https://api.cloudflare.com/client/v4"); err != nil {
		return err
	}
	if !ValidTTL(d.RecordTtl) {
		return &config.ValidationError{Key: "Dns:RecordTtl", Reason: msgTTL}
	}
	if d.Enabled() && !ValidZoneName(d.ZoneName) {
		return &config.ValidationError{Key: "Dns:ZoneName", Reason: "must be the zone's name (e.g. example.com) when the DNS cell is configured (Dns:ZoneId, Dns:ApiToken)"}
	}
	if d.Enabled() && strings.Trim(d.CellSubdomain, ".") != "" && !validCellSubdomain(d.CellSubdomain, d.ZoneName) {
		return &config.ValidationError{Key: "Dns:CellSubdomain", Reason: "must be empty or one or more DNS labels under Dns:ZoneName, without the zone's name " +
			"(e.g. cell for records label.cell.example.com), leaving room for a record's label (253 characters in all)"}
	}
	if msg := ContentProblem(d.DefaultContent, d.AllowPrivateContent); d.DefaultContent != "" && msg != "" {
		return &config.ValidationError{Key: "Dns:DefaultContent", Reason: "must be empty or an IPv4 address a record may point at: " + msg}
	}
	for _, l := range d.ReservedLabels {
		if n, ok := NormalizeLabel(l); !ok || n != strings.TrimSpace(l) {
			return &config.ValidationError{Key: "Dns:ReservedLabels", Reason: fmt.Sprintf("%q is not a lower-case DNS label", l)}
		}
	}
	return nil
}

// ValidZoneName reports whether s is a DNS zone name: at least two labels of a-z, 0-9 and '-'
// (1–63 characters, no hyphen at either end), at most 253 characters; a trailing dot is allowed.
func ValidZoneName(s string) bool {
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	return strings.Contains(s, ".") && validLabels(s)
}

// validCellSubdomain reports whether sub (dots at either end ignored, any case) is labels leaving
// room for a record's label (label.sub.zone at most 253 characters), not ending with the zone: the
// provider would take cell.example.com as complete, and we would show x.cell.example.com.example.com.
func validCellSubdomain(sub, zone string) bool {
	sub = strings.ToLower(strings.Trim(sub, "."))
	zone = strings.ToLower(strings.TrimSuffix(zone, "."))
	return validLabels(sub) && sub != zone && !strings.HasSuffix(sub, "."+zone) && len(sub)+len(zone) <= 250
}

// validLabels reports whether s (lower case) is dot-separated labels of a-z, 0-9 and '-' (1–63
// characters, no hyphen at either end), at most 253 characters.
func validLabels(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !labelRe.MatchString(l) { // the label rule of NormalizeLabel, without its IDN check
			return false
		}
	}
	return true
}
