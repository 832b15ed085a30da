//go:build !linux || race

package httpx

import "net"

// RawSocket is not used here: see rawsocket_linux.go. NewRawSocket answers nil, and callers use the
// connection's own Read and Write.
type RawSocket struct{}

// NewRawSocket answers nil: no raw system calls on this platform or under the race detector.
func NewRawSocket(net.Conn) *RawSocket { return nil }

// Read is never called (NewRawSocket answers nil).
func (*RawSocket) Read([]byte) (int, error) { panic("httpx: no RawSocket here") }

// Write is never called (NewRawSocket answers nil).
func (*RawSocket) Write([]byte) (int, error) { panic("httpx: no RawSocket here") }
