package httpx

import "time"

// SetLinger shortens the lingering-close bounds of s (before Listen), so tests need not wait 30 s.
func SetLinger(s *Server, total, idle time.Duration, maxBytes int64, maxConns int) {
	s.linger = lingerBounds{time: total, timeout: idle, maxBytes: maxBytes, maxConns: maxConns}
}

// Lingering is how many connections of s linger now.
func Lingering(s *Server) int {
	s.ln.mu.Lock()
	defer s.ln.mu.Unlock()
	return len(s.ln.lingering)
}

// OpenConns is how many connections s holds open now.
func OpenConns(s *Server) int {
	s.ln.mu.Lock()
	defer s.ln.mu.Unlock()
	return len(s.ln.open)
}
