package redisx_test

import (
	"strings"
	"testing"

	"provisioner/platform/redisx"
	"provisioner/platform/testutil"
)

// FuzzURLNeverEchoesThePassword: whatever a Redis URL holds around its password, Open never
// panics and its error (it reaches startup output) never repeats the password or any six
// characters of it.
func FuzzURLNeverEchoesThePassword(f *testing.F) {
	f.Add("", "127.0.0.1:6379", "0", "")
	f.Add("", ":bad", "0", "")
	f.Add("u", "h:6379", "x/y", "dial_timeout=zz")
	f.Add("/x", "h", "0", "")
	f.Add("#", "h", "0", "")
	f.Fuzz(func(t *testing.T, user, host, path, query string) {
		const pw = "Sup3rSecretPw"
		u := "redis://" + user + ":" + pw + "@" + host + "/" + path + "?" + query
		c, err := redisx.Open(u)
		if c != nil {
			_ = c.Close()
		}
		if err == nil {
			return
		}
		if testutil.RepeatsSecret(err.Error(), pw, user, host, path, query) {
			t.Fatalf("the error repeats the password: %v", err)
		}
	})
}

// TestMalformedURLIsRefusedWithoutEchoingIt: a password with an unencoded '/' or '#' is a clear
// error that repeats none of the URL, not a silently different address.
func TestMalformedURLIsRefusedWithoutEchoingIt(t *testing.T) {
	for _, u := range []string{"redis://:se/cret@h:6379/0", "redis://:se#cret@h:6379/0", "redis://#:secret@h"} {
		_, err := redisx.Open(u)
		if err == nil {
			t.Fatalf("%s: accepted", u)
		}
		if strings.Contains(err.Error(), "cret") {
			t.Fatalf("%s: the error repeats the password: %v", u, err)
		}
	}
	c, err := redisx.Open("redis://:s%2Fcret@127.0.0.1:6379/0")
	if err != nil {
		t.Fatalf("an encoded password is accepted: %v", err)
	}
	_ = c.Close()
}
