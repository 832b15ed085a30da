package mail_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/mail"
	"provisioner/platform/testutil"
)

func TestSMTPDelivers(t *testing.T) {
	srv := testutil.StartSMTP(t)
	s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, From: "no-reply@provisioner.test"}, nil)
	err := s.Send(context.Background(), mail.Message{To: "ada@example.test", Subject: "Reset", Text: "link: https://app.test/x#token=abc"})
	require.NoError(t, err)
	body := srv.WaitFor(t, "ada@example.test", 5*time.Second)
	assert.Contains(t, body, "Subject: Reset")
	assert.Contains(t, body, "https://app.test/x#token=abc")
}

func TestSMTPRejectionIsAnErrorWithoutThePassword(t *testing.T) {
	srv := testutil.StartSMTP(t)
	srv.Reject = true
	s := mail.New(mail.SMTPConfig{Host: srv.Host, Port: srv.Port, From: "no-reply@provisioner.test"}, nil)
	err := s.Send(context.Background(), mail.Message{To: "ada@example.test", Subject: "x", Text: "y"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
}

func TestLogSenderWhenNoHost(t *testing.T) {
	var buf bytes.Buffer
	s := mail.New(mail.SMTPConfig{}, slog.New(slog.NewJSONHandler(&buf, nil)))
	require.NoError(t, s.Send(context.Background(), mail.Message{To: "a@b.test", Subject: "Reset", Text: "the link"}))
	assert.Contains(t, buf.String(), "the link")
	assert.Contains(t, buf.String(), "a@b.test")
}
