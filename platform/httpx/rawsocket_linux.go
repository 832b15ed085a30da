//go:build linux && !race

package httpx

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// RawSocket reads and writes a TCP connection with raw system calls through the runtime's network
// poller, as net.Conn does (same deadlines, readiness waits and errors), but without the
// scheduler's system-call bookkeeping: the socket is non-blocking, and that bookkeeping woke the
// runtime's monitor thread after every idle moment (docs/performance.md, P2). Under the race
// detector the plain net.Conn calls are used, which tell the detector that written bytes happen
// before they are read.
type RawSocket struct {
	conn net.Conn
	rc   syscall.RawConn
}

// NewRawSocket returns the raw reader and writer of c, or nil when c is not a plain TCP
// connection (or under the race detector).
func NewRawSocket(c net.Conn) *RawSocket {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &RawSocket{conn: c, rc: rc}
}

// maxRW is the most one read or write system call moves, as internal/poll bounds it.
const maxRW = 1 << 30

// Read reads as net.Conn's Read does: at least one byte, io.EOF at the end of the stream, and
// *net.OpError for anything else (a timeout's reports Timeout()).
func (s *RawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	var n uintptr
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until readable (or the deadline)
			}
			return true
		}
	})
	switch {
	case err != nil:
		return 0, s.opError("read", err)
	case errno != 0:
		return 0, s.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

// Write writes all of p, as net.Conn's Write does, waiting for room as often as needed.
func (s *RawSocket) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			chunk := p[written:]
			if len(chunk) > maxRW {
				chunk = chunk[:maxRW]
			}
			n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(chunk))), uintptr(len(chunk)))
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return false // wait until writable (or the deadline)
			case e != 0:
				errno = e
				return true
			case n == 0:
				errno = syscall.EIO // no progress and no error: as internal/poll, not looping
				return true
			}
			written += int(n)
		}
		return true
	})
	switch {
	case err != nil:
		return written, s.opError("write", err)
	case errno == syscall.EIO:
		return written, s.opError("write", io.ErrUnexpectedEOF)
	case errno != 0:
		return written, s.opError("write", os.NewSyscallError("write", errno))
	}
	return written, nil
}

// opError is the error net.Conn's op would have returned: the raw connection's own errors come
// as a *net.OpError named "raw-read" or "raw-write", whose cause is kept.
func (s *RawSocket) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: s.conn.LocalAddr(), Addr: s.conn.RemoteAddr(), Err: err}
}
