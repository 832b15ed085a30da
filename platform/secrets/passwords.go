package secrets

import (
	"bufio"
	_ "embed"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// commonPasswords holds the 10,000 most common passwords (OWASP ASVS 5.0 §6.2), lower-cased, most
// common first. Source: the ranked "passwords" list of the npm package
// @zxcvbn-ts/language-common 3.0.4 (src/passwords.json, MIT licence), first 10,000 distinct
// lower-cased entries.
//
//go:embed common-passwords.txt
var commonPasswords string

var (
	commonOnce sync.Once
	commonSet  map[string]struct{}
)

func loadCommon() {
	commonSet = make(map[string]struct{}, 10000)
	sc := bufio.NewScanner(strings.NewReader(commonPasswords))
	for sc.Scan() {
		if w := strings.TrimSpace(sc.Text()); w != "" {
			commonSet[w] = struct{}{}
		}
	}
}

// IsCommon reports whether password (case-insensitively) is among the 10,000 most common.
func IsCommon(password string) bool {
	commonOnce.Do(loadCommon)
	_, ok := commonSet[strings.ToLower(password)]
	return ok
}

// CommonCount is the size of the embedded list.
func CommonCount() int {
	commonOnce.Do(loadCommon)
	return len(commonSet)
}

// NormalizePassword is the form of an account password that is hashed and checked: Unicode NFKC
// (NIST SP 800-63B §5.1.1.2), so "é" typed as one code point or as "e" + U+0301, and a fullwidth
// "Ａ" or an ASCII "A", are the same password.
func NormalizePassword(password string) string { return norm.NFKC.String(password) }
