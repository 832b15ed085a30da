package testutil

import (
	"crypto/tls"
	"encoding/base64"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// SMTPServer is a real SMTP server (emersion/go-smtp) on a free local port that keeps every message.
type SMTPServer struct {
	Host string
	Port int

	mu   sync.Mutex
	msgs []smtpMessage
	// Reject, when set, makes RCPT answer 550.
	Reject bool
	// RefuseAuth, when set before the client connects, offers AUTH PLAIN and refuses every login
	// with a 535 that quotes what the client sent, raw and as the base64 line, as some servers do.
	RefuseAuth bool

	srv *smtp.Server
}

// OfferTLS makes the server offer STARTTLS with cert (call it before the client connects).
func (s *SMTPServer) OfferTLS(cert tls.Certificate) {
	s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

type smtpMessage struct {
	To   []string
	Body string
	// TLS: the message came over TLS (STARTTLS or implicit).
	TLS bool
}

// StartSMTP starts the server, in clear text until OfferTLS; it stops when the test ends.
func StartSMTP(t testing.TB) *SMTPServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startSMTP(t, ln)
}

// StartSMTPS starts a server speaking implicit TLS (SMTPS, as on port 465) with cert.
func StartSMTPS(t testing.TB, cert tls.Certificate) *SMTPServer {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	return startSMTP(t, ln)
}

func startSMTP(t testing.TB, ln net.Listener) *SMTPServer {
	s := &SMTPServer{}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		if s.RefuseAuth {
			return &refusingAuthSession{smtpSession{s: s, c: c}}, nil
		}
		return &smtpSession{s: s, c: c}, nil
	}))
	s.srv = srv
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	s.Host = host
	s.Port, _ = strconv.Atoi(port)
	return s
}

// WaitFor returns the decoded body of the first message to addr, waiting up to d.
func (s *SMTPServer) WaitFor(t testing.TB, addr string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for _, m := range s.msgs {
			for _, to := range m.To {
				if strings.EqualFold(to, addr) {
					s.mu.Unlock()
					return m.Body
				}
			}
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no mail to %s within %s", addr, d)
	return ""
}

// WaitForN returns the decoded bodies of the first n messages to addr, in the order received,
// waiting up to d for them.
func (s *SMTPServer) WaitForN(t testing.TB, addr string, n int, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var bodies []string
		s.mu.Lock()
		for _, m := range s.msgs {
			for _, to := range m.To {
				if strings.EqualFold(to, addr) {
					bodies = append(bodies, m.Body)
					break
				}
			}
		}
		s.mu.Unlock()
		if len(bodies) >= n {
			return bodies[:n]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d mails to %s within %s", len(bodies), n, addr, d)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CountTo counts the messages to addr.
func (s *SMTPServer) CountTo(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		for _, to := range m.To {
			if strings.EqualFold(to, addr) {
				n++
			}
		}
	}
	return n
}

// OverTLS reports whether every message to addr came over TLS (false when there is none).
func (s *SMTPServer) OverTLS(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		for _, to := range m.To {
			if strings.EqualFold(to, addr) {
				if !m.TLS {
					return false
				}
				n++
			}
		}
	}
	return n > 0
}

type smtpSession struct {
	s  *SMTPServer
	c  *smtp.Conn
	to []string
}

// refusingAuthSession offers AUTH PLAIN and refuses every login, quoting the credentials.
type refusingAuthSession struct{ smtpSession }

func (x *refusingAuthSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (x *refusingAuthSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		line := base64.StdEncoding.EncodeToString([]byte(identity + "\x00" + username + "\x00" + password))
		return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8},
			Message: "authentication failed for " + username + " with password " + password + " (" + line + ")"}
	}), nil
}

func (x *smtpSession) Reset()        { x.to = nil }
func (x *smtpSession) Logout() error { return nil }
func (x *smtpSession) Mail(string, *smtp.MailOptions) error {
	return nil
}
func (x *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if x.s.Reject {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "mailbox unavailable"}
	}
	x.to = append(x.to, to)
	return nil
}
func (x *smtpSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	body := string(raw)
	// Decode quoted-printable bodies so tests can read links.
	if strings.Contains(strings.ToLower(body), "quoted-printable") {
		if dec, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body))); err == nil {
			body = string(dec)
		}
	}
	if d, err := new(mime.WordDecoder).DecodeHeader(body); err == nil {
		body = d
	}
	x.s.mu.Lock()
	_, overTLS := x.c.TLSConnectionState()
	x.s.msgs = append(x.s.msgs, smtpMessage{To: x.to, Body: body, TLS: overTLS})
	x.s.mu.Unlock()
	return nil
}
