// Package mail sends the service's mail (password reset links) over SMTP, or writes it to the log
// when no SMTP host is configured (Development only: config refuses that anywhere else).
package mail

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"provisioner/platform/config"
	"provisioner/platform/emailaddr"
	"provisioner/platform/redact"
)

// Message is one plain-text mail, with an optional HTML alternative.
type Message struct {
	To, Subject, Text string
	HTML              string
}

// Sender sends mail.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// SMTPConfig is the Smtp:* configuration.
type SMTPConfig struct {
	Host     string
	Port     int
	Username string
	Password string
	From     string
	// Security is config.SmtpStartTLS (also when empty), config.SmtpTLS or config.SmtpNone.
	Security string
}

// New returns an SMTP sender when cfg.Host is set, else a LogSender.
func New(cfg SMTPConfig, logger *slog.Logger) Sender {
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.Host == "" {
		return &LogSender{Logger: logger}
	}
	cfg.Security = config.Smtp{Security: cfg.Security}.SecurityMode()
	if cfg.Port == 0 {
		cfg.Port = 587
		if cfg.Security == config.SmtpTLS {
			cfg.Port = 465
		}
	}
	return &SMTPSender{cfg: cfg}
}

// SMTPSender sends through an SMTP server, by Security: STARTTLS required (a server that does not
// offer it is an error, nothing is sent), implicit TLS, or clear text; authentication only when a
// username is set; a 10 s timeout.
type SMTPSender struct{ cfg SMTPConfig }

// Send delivers m. Errors never include the SMTP password.
func (s *SMTPSender) Send(ctx context.Context, m Message) error {
	msg := gomail.NewMsg()
	if err := msg.From(s.cfg.From); err != nil {
		return fmt.Errorf("mail from %q: %w", s.cfg.From, err)
	}
	if err := msg.To(emailaddr.ASCIIDomain(m.To)); err != nil {
		return fmt.Errorf("mail to %q: %w", m.To, err)
	}
	msg.Subject(m.Subject)
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	opts := []gomail.Option{
		gomail.WithPort(s.cfg.Port),
		gomail.WithTimeout(10 * time.Second),
	}
	switch s.cfg.Security {
	case config.SmtpTLS:
		opts = append(opts, gomail.WithSSL())
	case config.SmtpNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if s.cfg.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	c, err := gomail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client for %s: %w", s.cfg.Host, err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("send mail via %s:%d: %w", s.cfg.Host, s.cfg.Port, s.scrub(err))
	}
	return nil
}

// scrub keeps the password out of err: a server refusing the login may quote what it got, the
// password itself or the base64 line of AUTH PLAIN or LOGIN carrying it.
func (s *SMTPSender) scrub(err error) error {
	pw := s.cfg.Password
	if pw == "" {
		return err
	}
	msg := err.Error()
	b64 := base64.StdEncoding.EncodeToString
	secrets := []string{pw, b64([]byte(pw)), b64([]byte("\x00" + s.cfg.Username + "\x00" + pw)),
		b64([]byte(s.cfg.Username + "\x00" + s.cfg.Username + "\x00" + pw))}
	clean := msg
	for _, x := range secrets {
		clean = strings.ReplaceAll(clean, x, redact.Mark)
	}
	if clean == msg {
		return err
	}
	return errors.New(clean) // not wrapped: the original text holds the password
}

// LogSender writes mail to the log: the development fallback.
type LogSender struct{ Logger *slog.Logger }

// Send logs m at INFO.
func (l *LogSender) Send(ctx context.Context, m Message) error {
	l.Logger.InfoContext(ctx, "mail (no Smtp:Host configured)", "to", m.To, "subject", m.Subject, "body", m.Text)
	return nil
}
