package httpx_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/fault"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
)

// TestOutcomeIsTheOneAnswerOfADrivenRow: done is 201 (a create) or 200; pending is 502 with the
// row and Retry-After, the whole seconds until the next attempt; failed is 502 without it; a
// conflict is the refusal's 409, with the row when there is one.
func TestOutcomeIsTheOneAnswerOfADrivenRow(t *testing.T) {
	row := "as stored"
	a := httpx.Answers{Created: true, Done: "made", Failed: "the provider failed"}

	res, err := httpx.Outcome(provision.Outcome{Result: provision.Done}, &row, a)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, res.Status)
	res, err = httpx.Outcome(provision.Outcome{Result: provision.Done}, &row, httpx.Answers{Done: "gone"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.Status)

	_, err = httpx.Outcome(provision.Outcome{Result: provision.Pending, RetryAt: time.Now().Add(2500 * time.Millisecond)}, &row, a)
	e := httpx.FromError(err)
	assert.Equal(t, http.StatusBadGateway, e.Status)
	assert.Equal(t, "3", e.GetHeaders().Get("Retry-After"))
	assert.Equal(t, row, e.Data)
	_, err = httpx.Outcome(provision.Outcome{Result: provision.Pending, RetryAt: time.Now().Add(-time.Minute)}, &row, a)
	assert.Equal(t, "1", httpx.FromError(err).GetHeaders().Get("Retry-After"), "a due attempt: at least a second")

	_, err = httpx.Outcome(provision.Outcome{Result: provision.Failed}, &row, a)
	e = httpx.FromError(err)
	assert.Equal(t, http.StatusBadGateway, e.Status)
	assert.Empty(t, e.GetHeaders().Get("Retry-After"))

	refusal := fault.Conflict("held by another party")
	_, err = httpx.Outcome(provision.Outcome{Result: provision.Conflict, Err: refusal}, &row, a)
	e = httpx.FromError(err)
	assert.Equal(t, http.StatusConflict, e.Status)
	assert.Equal(t, row, e.Data)
	assert.Nil(t, refusal.Data, "the refusal itself is not changed")
	_, err = httpx.Driven[string, string](nil, provision.Outcome{Result: provision.Conflict, Err: refusal}, nil, nil, a)
	e = httpx.FromError(err)
	assert.Equal(t, http.StatusConflict, e.Status)
	assert.Nil(t, e.Data)
}
