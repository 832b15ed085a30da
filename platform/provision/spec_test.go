package provision_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/provision"
	"provisioner/platform/testutil"
)

// providerError is a provider's answer, which users may read.
type providerError struct{ msg string }

func (e *providerError) Error() string { return e.msg }

// failing is a kind that only embeds its Spec: every create fails with the next of errs.
type failing struct {
	provision.Spec
	errs []error
}

func (p *failing) Create(context.Context, provision.CreateRequest) (provision.CreateResponse, error) {
	err := p.errs[0]
	p.errs = p.errs[1:]
	return provision.CreateResponse{}, err
}

func (p *failing) Delete(context.Context, provision.DeleteRequest) (provision.DeleteResponse, error) {
	return provision.DeleteResponse{}, nil
}

type specRow struct {
	Status   string `bun:"status"`
	Attempts int    `bun:"attempts"`
	LastErr  string `bun:"last_error"`
	Shown    string `bun:"error_message"`
}

// runSpec drives one Pending row of a new table of spec's kind through len(errs) failed
// attempts (MaxAttempts 2) and returns the row after each.
func runSpec(t *testing.T, spec provision.Spec, errs ...error) []specRow {
	db, _ := setup(t)
	spec.Rows = "spec_" + testutil.RandomSuffix()
	spec.Name = provision.Kind(spec.Rows)
	_, err := db.Exec(`CREATE TABLE ` + spec.Rows + ` (id bigserial PRIMARY KEY, status text NOT NULL, attempts int NOT NULL DEFAULT 0,
		next_attempt_at timestamptz NOT NULL DEFAULT now(), last_error text NOT NULL DEFAULT '', error_message text NOT NULL DEFAULT '',
		updated_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	id := insert(t, db, spec.Rows, "Pending", 1)[0]
	f, err := provision.NewFinisher(db, []provision.Provisioner{&failing{Spec: spec, errs: errs}}, provision.FinisherOptions{MaxAttempts: 2})
	require.NoError(t, err)
	var rows []specRow
	for range errs {
		_, err := db.Exec(`UPDATE `+spec.Rows+` SET next_attempt_at = now() WHERE id = ?`, id)
		require.NoError(t, err)
		f.RunOnce(context.Background())
		var row specRow
		require.NoError(t, db.NewSelect().Table(spec.Rows).Column("status", "attempts", "last_error", "error_message").
			Where("id = ?", id).Scan(context.Background(), &row))
		rows = append(rows, row)
	}
	return rows
}

var texts = provision.Texts{Internal: "internal error", Provider: []func(error) bool{provision.IsA[*providerError]}}

// TestASpecShowsOnlyTheProvidersErrorsAndGivesUp: a kind that declares its Texts shows the
// provider's error as it is and any other as the internal text; once attempts run out, the row
// ends Failed showing its last error as users may read it.
func TestASpecShowsOnlyTheProvidersErrorsAndGivesUp(t *testing.T) {
	spec := provision.Spec{Creating: "Pending", Active: "Active", Failed: "Failed", Texts: texts}
	rows := runSpec(t, spec, errors.New(`pq: duplicate key value violates unique constraint "x"`),
		&providerError{"provider answered 400: bad name"})
	assert.Equal(t, specRow{Status: "Pending", Attempts: 1, LastErr: "internal error"}, rows[0])
	assert.Equal(t, specRow{Status: "Failed", Attempts: 2, LastErr: "provider answered 400: bad name",
		Shown: "provider answered 400: bad name"}, rows[1])

	rows = runSpec(t, spec, &providerError{"provider answered 503"}, errors.New("sql: connection refused"))
	assert.Equal(t, "provider answered 503", rows[0].LastErr)
	assert.Equal(t, specRow{Status: "Failed", Attempts: 2, LastErr: "internal error", Shown: "internal error"}, rows[1])
}

// TestASpecWithoutFailedIsNeverGivenUp: a kind without a Failed status (a password rotation) keeps
// its row in flight, retried, however many attempts fail.
func TestASpecWithoutFailedIsNeverGivenUp(t *testing.T) {
	rows := runSpec(t, provision.Spec{Creating: "Pending", Active: "Done", Texts: texts},
		errors.New("engine answered 1"), &providerError{"engine answered 2"}, &providerError{"engine answered 3"})
	assert.Equal(t, specRow{Status: "Pending", Attempts: 3, LastErr: "engine answered 3"}, rows[2])
}

// TestASpecWithoutTextsShowsNoErrorOfOurOwn: a kind that declares no Texts stores the generic
// internal text for every error, its provider's as well: nothing of our own SQL reaches a user.
func TestASpecWithoutTextsShowsNoErrorOfOurOwn(t *testing.T) {
	rows := runSpec(t, provision.Spec{Creating: "Pending", Active: "Active", Failed: "Failed"},
		errors.New(`pq: relation "secret_table" does not exist`), &providerError{"provider answered 500"})
	assert.Equal(t, specRow{Status: "Pending", Attempts: 1, LastErr: provision.InternalText}, rows[0])
	assert.Equal(t, specRow{Status: "Failed", Attempts: 2, LastErr: provision.InternalText, Shown: provision.InternalText}, rows[1])
}
