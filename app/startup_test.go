package app_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app"
	"provisioner/app/apptest"
	"provisioner/platform/config"
)

// TestServeReportsAPortInUse: with the port taken, Serve returns the start error, which names the
// address and the cause; main prints it as one line.
func TestServeReportsAPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	cfg := apptest.TestConfig(t, apptest.With(map[string]any{"Server:Port": port}))

	done := make(chan error, 1)
	go func() { done <- app.Serve(cfg) }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("Serve did not return although its port is taken")
	}
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, ":"+strconv.Itoa(port), "names the address")
	assert.Contains(t, msg, "address already in use", "names the cause")
	assert.NotContains(t, msg, "\n", "one line")
}

// TestServeNamesABadSettingInOneClearLine: a setting only a provider can check (a rate, the Redis
// URL) stopped the process with fx's whole dependency chain ("could not build arguments for
// function … failed to build *httpx.Server: … failed to build *ratelimit.Limiter: …") in front
// of the key. Serve returns the configuration error itself, naming the key, as Load does.
func TestServeNamesABadSettingInOneClearLine(t *testing.T) {
	for key, value := range map[string]string{"RateLimit:PerIp": "abc", "Redis:Url": "http://not-redis", "Dns:OutboundRate": "zz"} {
		cfg := apptest.TestConfig(t, apptest.With(map[string]any{key: value}))
		err := app.Serve(cfg)
		require.Error(t, err, key)
		var ve *config.ValidationError
		require.ErrorAs(t, err, &ve, key)
		msg := err.Error()
		assert.True(t, strings.HasPrefix(msg, "configuration "), "%s: %s", key, msg)
		assert.Equal(t, 1, strings.Count(msg, "configuration "+key+": "), "%s named once, as the setting: %s", key, msg)
		assert.NotContains(t, msg, "RateLimit:DnsOutbound", "the setting's name, not an internal one")
		assert.NotContains(t, msg, "could not build", key)
		assert.NotContains(t, msg, "\n", "one line")
	}
}

// TestUnknownRateLimitNameIsRefused: a RateLimit key that names no limit (a typo such as
// RateLimit__Logins) was accepted and did nothing, the limit meant keeping its default. It now
// stops the process naming the key and the names there are.
func TestUnknownRateLimitNameIsRefused(t *testing.T) {
	cfg := apptest.TestConfig(t, apptest.With(map[string]any{"RateLimit:Logins": "5-M"}))
	a := fx.New(app.Options(cfg)...)
	err := app.StartupError(a.Err())
	require.Error(t, err, "a RateLimit key naming no limit")
	var ve *config.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.True(t, strings.EqualFold("RateLimit:Logins", ve.Key), ve.Key) // keys are case-insensitive (read lower-cased)
	assert.Contains(t, err.Error(), "Login")

	cfg = apptest.TestConfig(t, apptest.With(map[string]any{"RateLimit:login": "5-M", "RateLimit:PERIP": "100-M"}))
	a = fx.New(app.Options(cfg)...)
	require.NoError(t, a.Err(), "names match case-insensitively")
}

// TestServeNamesAFailedDependencyInOneClearLine: a constructor's failure (the control database
// unreachable) is printed as that constructor's own error, not behind fx's chain of "could not
// build arguments for function …" (about 400 characters of wiring before the cause).
func TestServeNamesAFailedDependencyInOneClearLine(t *testing.T) {
	cfg := apptest.TestConfig(t)
	cfg.ConnectionStrings.Control = "postgres://postgres:not-shown@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"
	err := app.Serve(cfg)
	require.Error(t, err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "connect to control database "), msg)
	assert.NotContains(t, msg, "could not build", msg)
	assert.NotContains(t, msg, "not-shown", "the password is masked")
}
