package config_test

import (
	"testing"

	"provisioner/platform/config"
)

// FuzzEnvironment: any environment either loads or fails with an error; no panic.
func FuzzEnvironment(f *testing.F) {
	f.Add("Server__Port", "5133")
	f.Add("Frontend__Origins__0", "https://a.example")
	f.Add("RateLimit__Login", "10-M")
	f.Add("Jwt__ExpiryMinutes", "-1")
	f.Add("Databases__MaxPerUser", "1e99")
	f.Fuzz(func(t *testing.T, k, v string) {
		env := []string{"Jwt__Key=" + goodKey, "Secrets__EncryptionKey=" + goodEnc, k + "=" + v}
		_, _ = config.Load(config.Source{File: "/dev/null", Env: env})
	})
}
