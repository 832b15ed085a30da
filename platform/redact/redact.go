// Package redact makes a provider's error text fit to store, show to users and log: the secrets
// we sent it (an API key, a token it may echo back) and anything credential-like are replaced by
// "[redacted]", control characters dropped, the text one bounded line.
package redact

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mark replaces what is redacted.
const Mark = "[redacted]"

var (
	bearerRe  = regexp.MustCompile(`(?i)\b(bearer|basic)\s+\S+`)
	secretKV  = regexp.MustCompile(`(?i)\b(api[_-]?key|key|token|secret|password|passwd|pwd|authorization|credentials?)(\s*[:=]\s*|\s+)("[^"]*"|'[^']*'|\S+)`)
	tokenish  = regexp.MustCompile(`[A-Za-z0-9_\-+/=.~]{24,}`)
	spaceRuns = regexp.MustCompile(`\s+`)
)

// Message returns msg with every non-empty secret redacted (and every piece of one, a prefix, a
// suffix or a run inside it, of MinSecretLen bytes or more: a provider may echo it cut short), token-like words (24 or more
// characters, see tokenLike) and credentials after key=, token:, Bearer, Basic,
// Authorization redacted, control characters replaced by spaces, as one line of at most max bytes
// (cut on a character boundary, then "…"; max <= 0: no bound).
func Message(msg string, max int, secrets ...string) string {
	msg = strings.ToValidUTF8(msg, "")
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, Mark)
			msg = redactPieces(msg, s)
		}
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, msg)
	msg = bearerRe.ReplaceAllString(msg, "$1 "+Mark)
	msg = secretKV.ReplaceAllString(msg, "$1$2"+Mark)
	msg = tokenish.ReplaceAllStringFunc(msg, func(w string) string {
		if tokenLike(w) {
			return Mark
		}
		return w
	})
	msg = strings.TrimSpace(spaceRuns.ReplaceAllString(msg, " "))
	if max > 0 && len(msg) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// redactPieces replaces in msg every run of at least MinSecretLen bytes that is also a run of
// secret (a token echoed cut short, or from its middle). Shorter pieces are left alone, like
// secrets shorter than MinSecretLen are by Secret: they are too short to tell from words.
func redactPieces(msg, secret string) string {
	if len(secret) < MinSecretLen || len(msg) < MinSecretLen {
		return msg
	}
	windows := make(map[string]struct{}, len(secret)-MinSecretLen+1)
	for i := 0; i+MinSecretLen <= len(secret); i++ {
		windows[secret[i:i+MinSecretLen]] = struct{}{}
	}
	var b strings.Builder
	last := 0
	for i := 0; i+MinSecretLen <= len(msg); {
		if _, ok := windows[msg[i:i+MinSecretLen]]; !ok {
			i++
			continue
		}
		end := i + MinSecretLen
		for end < len(msg) && strings.Contains(secret, msg[i:end+1]) {
			end++
		}
		b.WriteString(msg[last:i])
		b.WriteString(Mark)
		last, i = end, end
	}
	if last == 0 {
		return msg
	}
	b.WriteString(msg[last:])
	return b.String()
}
