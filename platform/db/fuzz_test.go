package db_test

import (
	"testing"

	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// FuzzConnectionStringsNeverEchoThePassword: whatever a connection string holds around its
// password (a user name with '#', a host with '/', a malformed query…), building a connector never
// panics, and neither its error nor Redact (both reach logs and startup output) repeats the
// password or any six characters of it.
func FuzzConnectionStringsNeverEchoThePassword(f *testing.F) {
	f.Add("user", "127.0.0.1:5432", "control", "sslmode=disable")
	f.Add("user", "h:bad port", "d", "sslmode=bogus")
	f.Add("u", "[::1", "d", "x=%zz")
	f.Add("#", "0", "0", "0")
	f.Add("u/x", "h", "d", "")
	f.Add("u", "h", "d", "password=other&sslmode=bogus")
	f.Add("", "h:5432,h2:5433", "d", "target_session_attrs=nonsense&connect_timeout=-1")
	f.Fuzz(func(t *testing.T, user, host, path, query string) {
		const pw = "Sup3rSecretPw"
		dsn := "postgres://" + user + ":" + pw + "@" + host + "/" + path + "?" + query
		leaks := func(msg string) bool { return testutil.RepeatsSecret(msg, pw, user, host, path, query) }
		if r := db.Redact(dsn); leaks(r) {
			t.Fatalf("Redact repeats the password: %s", r)
		}
		if _, err := db.Connector(dsn); err != nil && leaks(err.Error()) {
			t.Fatalf("the error repeats the password: %v", err)
		}
	})
}
