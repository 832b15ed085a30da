package redisx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientLogsGoThroughSlog: go-redis's own log lines (a dial that failed all its attempts) are
// records of the service's JSON logger, not plain "redis: …" lines on stderr.
func TestClientLogsGoThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now: dials are refused

	c, err := Open("redis://" + addr + "/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Error(t, Ping(context.Background(), c))

	out := strings.TrimSpace(buf.String())
	require.Contains(t, out, "failed to dial", "the client's log line reached slog")
	for _, line := range strings.Split(out, "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		require.Equal(t, "WARN", rec["level"], line)
	}
}
