package app_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app"
	"provisioner/platform/testutil/apptest"
)

// TestServeReportsAPortInUse: with the port taken, the service used to exit with status 1 and
// print nothing (fx's Run with the silent fx logger). Serve returns the start error, which names
// the address and the cause; main prints it as one line.
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
