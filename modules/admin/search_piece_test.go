package admin

import "testing"

// searchPiece is a part of the search (so every row matching the search matches it): the longest
// word with its neighbouring characters, the whole search when no word has three characters.
func TestSearchPiece(t *testing.T) {
	for search, want := range map[string]string{
		"seed user 7777":      " 7777",
		"seed7777@scale.test": "seed7777@",
		"alexander smith":     "alexander ",
		"ab 1234 cdef":        " 1234 ",
		"abcd 1234":           " 1234",
		"ab cd":               "ab cd",
		"%":                   "%",
		"émilie":              "émilie",
		"x":                   "x",
	} {
		if got := searchPiece(search); got != want {
			t.Errorf("searchPiece(%q) = %q, want %q", search, got, want)
		}
	}
}
