package httpx_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"provisioner/platform/fault"
	"provisioner/platform/httpx"
)

func TestDomainErrorsMapToTheirStatus(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"not found", fault.NotFound("DNS record not found"), http.StatusNotFound, "DNS record not found"},
		{"conflict wrapped", fmt.Errorf("create: %w", fault.Conflict("Quota reached")), http.StatusConflict, "Quota reached"},
		{"invalid", fault.InvalidField("label", "is not a DNS label"), http.StatusBadRequest, "Validation failed"},
		{"unauthorized", fault.Unauthorized("Sign in again"), http.StatusUnauthorized, "Sign in again"},
		{"forbidden", fault.Forbidden("Admins only"), http.StatusForbidden, "Admins only"},
		{"upstream", fault.Upstream("The provider failed", map[string]int{"id": 1}), http.StatusBadGateway, "The provider failed"},
		{"unavailable", fault.Unavailable("The DNS cell is not configured"), http.StatusServiceUnavailable, "The DNS cell is not configured"},
		{"too many", fault.TooMany("Slow down", 1500*time.Millisecond), http.StatusTooManyRequests, "Slow down"},
		{"unprocessable", fault.Unprocessable("Key reused"), http.StatusUnprocessableEntity, "Key reused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := httpx.FromError(c.err)
			assert.Equal(t, c.status, got.Status)
			assert.Equal(t, c.msg, got.Message)
		})
	}
}

func TestDomainErrorCarriesFieldsDataAndRetryAfter(t *testing.T) {
	got := httpx.FromError(fault.Invalid("Validation failed", fault.FieldError{Field: "content", Message: "is private"}))
	assert.Equal(t, []httpx.FieldError{{Field: "content", Message: "is private"}}, got.Errors)

	got = httpx.FromError(fault.Upstream("The provider failed", "row").WithRetryAfter(1500 * time.Millisecond))
	assert.Equal(t, "row", got.Data)
	assert.Equal(t, "2", got.GetHeaders().Get("Retry-After"), "rounded up to whole seconds")

	cause := errors.New("dial tcp: refused")
	err := fault.Conflict("Taken").WithCause(cause)
	assert.ErrorIs(t, err, fault.ErrConflict)
	assert.ErrorIs(t, err, httpx.ErrConflict)
	assert.ErrorIs(t, err, cause)
	assert.NotContains(t, httpx.FromError(err).Message, "refused", "a cause is logged, never shown")
}
