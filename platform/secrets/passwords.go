package secrets

import (
	"bufio"
	_ "embed"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

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

// Rules of an account password, in Unicode code points of its NFKC form (NormalizePassword), the
// text that is hashed: so one password is accepted or refused alike however a device spells it
// (composed or decomposed accents, fullwidth or ASCII letters).
const (
	MinPasswordLen = 8
	MaxPasswordLen = 128
	// MaxPasswordInput bounds a password as sent, before normalisation: 4 × MaxPasswordLen, since
	// canonical decomposition makes at most 4 code points of one character, so every canonically
	// equivalent spelling of an accepted password fits.
	MaxPasswordInput = 4 * MaxPasswordLen
)

// NormalizePassword is the form of an account password that is hashed and checked: Unicode NFKC
// (NIST SP 800-63B §5.1.1.2), so "é" typed as one code point or as "e" + U+0301, and a fullwidth
// "Ａ" or an ASCII "A", are the same password.
func NormalizePassword(password string) string { return norm.NFKC.String(password) }

// PasswordProblem says what is wrong with a new account password ("" when nothing): its NFKC form
// must have MinPasswordLen to MaxPasswordLen code points and not be a common password.
func PasswordProblem(password string) string {
	n := NormalizePassword(password)
	if c := utf8.RuneCountInString(n); c < MinPasswordLen || c > MaxPasswordLen {
		return fmt.Sprintf("must be %d–%d characters (Unicode code points, counted after NFKC normalisation)", MinPasswordLen, MaxPasswordLen)
	}
	if IsCommon(n) {
		return "is too common; choose a less guessable password"
	}
	return ""
}
