package databases_test

import (
	"testing"

	"provisioner/modules/databases"
)

// FuzzGeneratedNames: every generated database and role name is a safe identifier on both engines
// (at most 63 characters, [a-z0-9_], starting with a letter) whatever the user id.
func FuzzGeneratedNames(f *testing.F) {
	for _, id := range []int64{1, 0, -1, 1 << 62, 9223372036854775807} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id int64) {
		if id <= 0 {
			return // ids are positive
		}
		n := databases.NewName(id)
		if !databases.SafeName.MatchString(n) || len(n) > 63 {
			t.Fatalf("unsafe name %q for user %d", n, id)
		}
	})
}
