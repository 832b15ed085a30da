package audit

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Bounds of details posted by a client (an admin's manual note or amendment): JSON nested
// thousands of levels deep was stored as is, to be walked by every reader of the log.
const (
	MaxClientDetailsDepth = 32
	MaxClientDetailsBytes = 64 << 10
)

// SystemNamespaces are the first segments of the actions the service records itself
// (aikey.rotated, user.deleted, …). Each module declares its own (module.Module's
// AuditNamespaces): the Recorder refuses to store a service event outside them, and an Admin's
// note inside them.
type SystemNamespaces []string

// NewSystemNamespaces is the set of namespaces, sorted and without repeats.
func NewSystemNamespaces(ns ...string) SystemNamespaces {
	out := slices.Clone(ns)
	for i := range out {
		out[i] = strings.ToLower(out[i])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Reserved reports whether action is in one of the namespaces (compared case-insensitively), so
// that an event with it could pass for one the service recorded.
func (s SystemNamespaces) Reserved(action string) bool {
	a := strings.ToLower(strings.TrimSpace(action))
	for _, ns := range s {
		if a == ns || strings.HasPrefix(a, ns+".") {
			return true
		}
	}
	return false
}

// ClientActionProblem says what is wrong with the action of an event a client records ("" when
// nothing is): it must be plain ASCII, words of letters, digits, '_' and '-' joined by single dots,
// as the service's own are (database.password.revealed). Otherwise a Cyrillic "а" or an invisible
// U+200B made "dаtabase.created" slip past Reserved while looking like the service's event.
func ClientActionProblem(action string) string {
	if !clientAction.MatchString(action) {
		return "must be plain ASCII: words of letters, digits, _ and - joined by single dots, e.g. note.manual"
	}
	return ""
}

var clientAction = regexp.MustCompile(`^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$`)

// ReservedMessage explains a refused action.
func (s SystemNamespaces) ReservedMessage() string {
	return fmt.Sprintf("is reserved for the events the service records itself (namespaces %s.*); use another, e.g. note.manual",
		strings.Join(s, ".*, "))
}

// MaxExactNumber is the largest magnitude of a number in details a client posts: JSON readers
// (this service's, JavaScript's) read numbers as doubles, so a larger integer comes back as
// another one (12345678901234567890 as 12345678901234567000), as I-JSON (RFC 7493 §2.2) warns.
const MaxExactNumber = 1<<53 - 1

// ClientDetailsProblem says what is wrong with details posted by a client ("" when nothing is):
// nested more than MaxClientDetailsDepth objects and arrays deep, longer than
// MaxClientDetailsBytes as JSON, or holding a number beyond ±MaxExactNumber (which would be
// stored as another number: it is refused rather than changed).
func ClientDetailsProblem(details map[string]any) string {
	if depth(details, 0) > MaxClientDetailsDepth {
		return fmt.Sprintf("must not nest objects and arrays more than %d levels deep", MaxClientDetailsDepth)
	}
	if inexactNumber(details) {
		return fmt.Sprintf("must not hold numbers beyond ±%d, which JSON does not keep exactly: send such a value as a string", MaxExactNumber)
	}
	raw, err := json.Marshal(details)
	if err != nil || len(raw) > MaxClientDetailsBytes {
		return fmt.Sprintf("must be at most %d KiB as JSON", MaxClientDetailsBytes>>10)
	}
	return ""
}

// depth is the nesting depth of v (an object or array counts one level), given that v is at
// level d; it stops counting past MaxClientDetailsDepth.
func depth(v any, d int) int {
	if d > MaxClientDetailsDepth {
		return d
	}
	deepest := d
	switch x := v.(type) {
	case map[string]any:
		for _, c := range x {
			deepest = max(deepest, depth(c, d+1))
		}
		deepest = max(deepest, d+1)
	case []any:
		for _, c := range x {
			deepest = max(deepest, depth(c, d+1))
		}
		deepest = max(deepest, d+1)
	}
	return deepest
}

// inexactNumber reports whether v holds a number beyond ±MaxExactNumber (depth bounded already).
func inexactNumber(v any) bool {
	switch x := v.(type) {
	case float64:
		return math.Abs(x) > MaxExactNumber
	case map[string]any:
		for _, c := range x {
			if inexactNumber(c) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if inexactNumber(c) {
				return true
			}
		}
	}
	return false
}
