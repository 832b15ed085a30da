package mail_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/mail"
	"provisioner/platform/testutil"
)

// localCert is trusted by this test process (SSL_CERT_FILE), for a server offering STARTTLS.
var localCert tls.Certificate

func TestMain(m *testing.M) {
	cert, pemBytes, err := testutil.LocalCert()
	f := filepath.Join(os.TempDir(), fmt.Sprintf("mail-test-ca-%d.pem", os.Getpid()))
	if err == nil {
		if err = os.WriteFile(f, pemBytes, 0o600); err == nil {
			err = os.Setenv("SSL_CERT_FILE", f)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test certificate:", err)
		os.Exit(1)
	}
	localCert = cert
	code := m.Run()
	_ = os.Remove(f)
	os.Exit(code)
}

func TestSMTPDelivers(t *testing.T) {
	srv := testutil.StartSMTP(t)
	srv.OfferTLS(localCert)
	s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, From: "no-reply@provisioner.test"}, nil)
	err := s.Send(context.Background(), mail.Message{To: "ada@example.test", Subject: "Reset", Text: "link: https://app.test/x#token=abc"})
	require.NoError(t, err)
	body := srv.WaitFor(t, "ada@example.test", 5*time.Second)
	assert.Contains(t, body, "Subject: Reset")
	assert.Contains(t, body, "https://app.test/x#token=abc")
	assert.True(t, srv.OverTLS("ada@example.test"), "STARTTLS by default")
}

// TestStartTLSIsRequired: with Smtp:Security starttls (the default), a server that does not offer
// STARTTLS gets nothing: the send is an error and no mail (no reset link) crosses the network in
// clear text.
func TestStartTLSIsRequired(t *testing.T) {
	for _, security := range []string{"", "starttls", "STARTTLS"} {
		srv := testutil.StartSMTP(t)
		s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, From: "no-reply@provisioner.test", Security: security}, nil)
		err := s.Send(context.Background(), mail.Message{To: "ada@example.test", Subject: "Reset", Text: "link"})
		require.Error(t, err, "security %q", security)
		assert.Contains(t, err.Error(), "STARTTLS")
		assert.Zero(t, srv.CountTo("ada@example.test"), "security %q", security)
	}
}

// TestImplicitTLS: Smtp:Security tls speaks TLS from the first byte (SMTPS).
func TestImplicitTLS(t *testing.T) {
	srv := testutil.StartSMTPS(t, localCert)
	s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, From: "no-reply@provisioner.test", Security: "tls"}, nil)
	require.NoError(t, s.Send(context.Background(), mail.Message{To: "ada@example.test", Subject: "Reset", Text: "link"}))
	assert.Contains(t, srv.WaitFor(t, "ada@example.test", 5*time.Second), "link")
	assert.True(t, srv.OverTLS("ada@example.test"))
}

// TestSecurityNoneSendsInClearText: the explicit opt-out talks to a server without STARTTLS and
// does not start TLS even when offered.
func TestSecurityNoneSendsInClearText(t *testing.T) {
	srv := testutil.StartSMTP(t)
	s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, From: "no-reply@provisioner.test", Security: "none"}, nil)
	require.NoError(t, s.Send(context.Background(), mail.Message{To: "ada@example.test", Subject: "Reset", Text: "link"}))
	assert.Contains(t, srv.WaitFor(t, "ada@example.test", 5*time.Second), "link")
	assert.False(t, srv.OverTLS("ada@example.test"))
}

func TestSMTPRejectionIsAnError(t *testing.T) {
	srv := testutil.StartSMTP(t)
	srv.Reject = true
	s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, From: "no-reply@provisioner.test", Security: "none"}, nil)
	err := s.Send(context.Background(), mail.Message{To: "ada@example.test", Subject: "x", Text: "y"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "550")
}

// TestRefusedLoginIsAnErrorWithoutThePassword: a server that refuses the login quoting what it got
// (the password, or the base64 AUTH line carrying it) does not put the password into our error,
// which is logged.
func TestRefusedLoginIsAnErrorWithoutThePassword(t *testing.T) {
	srv := testutil.StartSMTP(t)
	srv.RefuseAuth = true
	srv.OfferTLS(localCert) // the password is only ever sent over TLS
	s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, Username: "mailer", Password: "s3cret-Pa55",
		From: "no-reply@provisioner.test"}, nil)
	err := s.Send(context.Background(), mail.Message{To: "ada@example.test", Subject: "x", Text: "y"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "535", "the server's refusal is kept")
	assert.NotContains(t, err.Error(), "s3cret-Pa55")
	assert.NotContains(t, err.Error(), base64.StdEncoding.EncodeToString([]byte("\x00mailer\x00s3cret-Pa55")))
	assert.Zero(t, srv.CountTo("ada@example.test"))
}

// TestInternationalDomainIsSentInASCII: addresses are stored with the domain in Unicode; the mail
// goes to its ASCII form, which every server routes without SMTPUTF8.
func TestInternationalDomainIsSentInASCII(t *testing.T) {
	srv := testutil.StartSMTP(t)
	s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, From: "no-reply@provisioner.test", Security: "none"}, nil)
	require.NoError(t, s.Send(context.Background(), mail.Message{To: "ada@bücher.example", Subject: "Reset", Text: "link"}))
	assert.Contains(t, srv.WaitFor(t, "ada@xn--bcher-kva.example", 5*time.Second), "link")
}

func TestLogSenderWhenNoHost(t *testing.T) {
	var buf bytes.Buffer
	s := mail.New(mail.SMTPConfig{}, slog.New(slog.NewJSONHandler(&buf, nil)))
	require.NoError(t, s.Send(context.Background(), mail.Message{To: "a@b.test", Subject: "Reset", Text: "the link"}))
	assert.Contains(t, buf.String(), "the link")
	assert.Contains(t, buf.String(), "a@b.test")
}
