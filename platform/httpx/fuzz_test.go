package httpx_test

import (
	"testing"

	"provisioner/platform/httpx"
)

// FuzzTrustedProxies: any configured value is parsed or refused without panicking.
func FuzzTrustedProxies(f *testing.F) {
	f.Add("10.0.0.0/8")
	f.Add("::1")
	f.Add("300.1.1.1")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = httpx.ParseTrustedProxies([]string{s})
	})
}
