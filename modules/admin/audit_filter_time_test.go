package admin_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"provisioner/app/apptest"
)

// TestAuditListTimeFiltersBeforeYearOne: a from or to before 0001-01-01T00:00:00Z in UTC
// (0001-01-01T00:00:00+01:00, 0000-06-01T00:00:00Z) went to PostgreSQL with year 0000, which it
// refuses: 500. It is now a 400 naming the parameter; the earliest accepted time and the latest
// RFC 3339 can write still answer 200.
func TestAuditListTimeFiltersBeforeYearOne(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	for _, tc := range []struct{ query, field string }{
		{"to=0001-01-01T00:00:00%2B01:00", "to"},
		{"from=0000-06-01T00:00:00Z", "from"},
		{"from=0001-01-01T00:59:59.999999%2B01:00&to=2026-01-01T00:00:00Z", "from"},
	} {
		r := a.Get("/api/audit-events?"+tc.query, admin)
		if assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", tc.query, r.Raw) {
			assert.Equal(t, []string{tc.field}, r.Fields(), tc.query)
		}
	}
	for _, q := range []string{"from=0001-01-01T00:00:00Z", "from=0001-01-01T00:00:00.000001Z",
		"to=0001-01-01T01:00:00%2B01:00", "to=9999-12-31T23:59:59-23:59", "from=9999-12-31T23:59:59-23:59"} {
		r := a.Get("/api/audit-events?"+q, admin)
		assert.Equal(t, http.StatusOK, r.Status, "%s: %s", q, r.Raw)
	}
}

// TestAuditListToAtTheEarliestTimeListsNothing: to=0001-01-01T00:00:00Z (nothing is before it)
// read as the zero time, which meant "no to", so it listed every event. It lists none now.
func TestAuditListToAtTheEarliestTimeListsNothing(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	a.Register(t)
	var all, none struct {
		TotalCount int `json:"totalCount"`
	}
	a.Get("/api/audit-events", admin).Decode(t, &all)
	assert.NotZero(t, all.TotalCount)
	r := a.Get("/api/audit-events?to=0001-01-01T00:00:00Z", admin)
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &none)
	assert.Zero(t, none.TotalCount, "nothing is before year 1")
}
