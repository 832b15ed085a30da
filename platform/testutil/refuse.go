package testutil

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// RefuseUpdates makes the control database refuse every UPDATE of table whose new row matches
// when (an SQL condition on NEW, e.g. "NEW.status = 'Active' AND NEW.user_id = 7"), with an error
// whose text carries internal details ("relation secret_table"): a failure on the service's own
// side, for tests that what users are shown never carries it. The returned lift ends the refusal;
// it is also lifted when the test ends. Tests sharing a package database must not use it on the
// same table at once.
func RefuseUpdates(t testing.TB, db interface {
	Exec(query string, args ...any) (sql.Result, error)
}, table, when string) (lift func()) {
	t.Helper()
	exec := func(q string) error { _, err := db.Exec(q); return err }
	fn := "test_refuse_" + table
	require.NoError(t, exec(fmt.Sprintf(`CREATE OR REPLACE FUNCTION %s() RETURNS trigger AS $f$ BEGIN
		IF %s THEN RAISE EXCEPTION 'internal detail: relation secret_table'; END IF;
		RETURN NEW; END $f$ LANGUAGE plpgsql`, fn, when)))
	require.NoError(t, exec(fmt.Sprintf("CREATE TRIGGER %s BEFORE UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s()", fn, table, fn)))
	lift = func() { _ = exec(fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", fn, table)) }
	t.Cleanup(lift)
	return lift
}
