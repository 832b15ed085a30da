package testutil

import "strings"

// RepeatsSecret reports whether msg holds any six consecutive characters of secret that none of
// the inputs (what a fuzzer put around the secret, which a message may quote legitimately) holds:
// a partial leak counts as much as a whole one.
func RepeatsSecret(msg, secret string, inputs ...string) bool {
	all := strings.Join(inputs, "\x00")
	for i := 0; i+6 <= len(secret); i++ {
		if w := secret[i : i+6]; strings.Contains(msg, w) && !strings.Contains(all, w) {
			return true
		}
	}
	return false
}
