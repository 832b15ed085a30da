//go:build chaos

// Package chaos runs the real binary against a fake DNS provider, a fake wfauto cell and the real
// tenant engines, drives concurrent creates and deletes, kills the process with SIGKILL at random
// moments, restarts it, lets the finisher settle, and checks that the local trace and the external
// systems agree. Run it with scripts/chaos.sh (REPLICAS=2 runs two instances behind a round-robin
// client; FAULTS=0.3 makes the fakes fail 30% of calls).
package chaos

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/modules/wfauto/wfautotest"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return v
	}
	return def
}

type instance struct {
	cmd  *exec.Cmd
	port int
	env  []string
	bin  string
	log  *os.File
}

func (in *instance) start(t *testing.T) {
	t.Helper()
	in.cmd = exec.Command(in.bin)
	in.cmd.Env = append(os.Environ(), append(in.env, fmt.Sprintf("Server__Port=%d", in.port))...)
	in.cmd.Stdout, in.cmd.Stderr = in.log, in.log
	require.NoError(t, in.cmd.Start())
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", in.port))
		if err == nil {
			res.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("instance on %d did not start", in.port)
}

func (in *instance) kill() {
	if in.cmd != nil && in.cmd.Process != nil {
		_ = in.cmd.Process.Kill() // SIGKILL: no graceful shutdown
		_, _ = in.cmd.Process.Wait()
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type client struct {
	http  *http.Client
	ports []int
	n     atomic.Int64
	five  atomic.Int64 // 500 answers seen (must stay 0)
}

func (c *client) do(method, path, token string, body any) (int, map[string]any) {
	port := c.ports[int(c.n.Add(1))%len(c.ports)] // round-robin across replicas
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	var res *http.Response
	for deadline := time.Now().Add(20 * time.Second); ; {
		if r != nil {
			_, _ = r.(*bytes.Reader).Seek(0, io.SeekStart)
		}
		req, _ := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), r)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		var err error
		res, err = c.http.Do(req)
		if err == nil {
			break
		}
		// Refused: the instance is down and the request was never sent, so sending it again
		// (as a client with retries does) is safe; it keeps the work going across restarts.
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return 0, nil // the process died with the request in flight: unknown outcome
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer res.Body.Close()
	var env map[string]any
	_ = json.NewDecoder(res.Body).Decode(&env)
	if res.StatusCode == http.StatusInternalServerError {
		c.five.Add(1)
	}
	data, _ := env["data"].(map[string]any)
	return res.StatusCode, data
}

type user struct {
	token string
	id    int64
}

// outcome is the last outcome the client saw succeed for a resource.
type outcome struct {
	kind    string // database, dns, wfauto
	id      int64
	deleted bool
}

func TestChaos(t *testing.T) {
	replicas := envInt("REPLICAS", 1)
	kills := envInt("KILLS", 12)
	ops := envInt("OPS", 200)
	faults := envFloat("FAULTS", 0)
	dir := t.TempDir()
	bin := filepath.Join(dir, "provisioner")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	// Names already on the shared tenant engine (other test packages' databases) are not ours.
	tconn, err := db.Connector(testutil.TenantPostgresURL(t))
	require.NoError(t, err)
	tenant := sql.OpenDB(tconn)
	defer tenant.Close()
	ours := regexp.MustCompile(`^u\d+_[a-z0-9]{12}$`)
	engineNames := func() map[string]bool {
		out := map[string]bool{}
		rows, err := tenant.Query("SELECT datname FROM pg_database UNION ALL SELECT rolname FROM pg_roles")
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var n string
			require.NoError(t, rows.Scan(&n))
			if ours.MatchString(n) {
				out[n] = true
			}
		}
		return out
	}
	before := engineNames()

	fake := cloudflaretest.New("zone-chaos", "cf-token", "example.com")
	defer fake.Close()
	if faults > 0 {
		fake.SetRandFault(func() *cloudflaretest.Fault {
			if rand.Float64() >= faults {
				return nil
			}
			switch rand.IntN(3) {
			case 0:
				return &cloudflaretest.Fault{Status: 500}
			case 1:
				return &cloudflaretest.Fault{Status: 429, RetryAfter: 1}
			default:
				return &cloudflaretest.Fault{Delay: 1200 * time.Millisecond, Status: 502}
			}
		})
	}
	wf := wfautotest.New("k")
	defer wf.Close()
	if faults > 0 {
		wf.SetRandFault(func() *wfautotest.Fault {
			if rand.Float64() >= faults {
				return nil
			}
			if rand.IntN(2) == 0 {
				return &wfautotest.Fault{Status: http.StatusServiceUnavailable, Delay: 1200 * time.Millisecond} // a timeout for the client
			}
			return &wfautotest.Fault{Status: http.StatusServiceUnavailable}
		})
	}

	logf, err := os.Create(filepath.Join(dir, "service.log"))
	require.NoError(t, err)
	env := []string{
		"Environment=Development", "Log__Level=warn",
		"Jwt__Key=chaos-jwt-key-0123456789-abcdefghijklmnopqrstuvwxyz",
		"Secrets__EncryptionKey=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"ConnectionStrings__Control=" + testutil.PackageDatabase(t),
		"ConnectionStrings__TenantPostgres=" + testutil.TenantPostgresURL(t),
		"ConnectionStrings__TenantMysql=", "Databases__RecoveryHours=0", // a DELETE drops at once
		"Redis__Url=" + testutil.RedisURL(), "Redis__KeyPrefix=chaos" + testutil.RandomSuffix(),
		"Dns__BaseUrl=" + fake.URL, "Dns__ZoneId=zone-chaos", "Dns__ApiToken=cf-token", "Dns__ZoneName=example.com",
		"Dns__DefaultContent=203.0.113.9", "Dns__TimeoutSeconds=1", "Dns__MaxRecordsPerUser=1000", "Dns__OutboundRate=100000-M",
		"WfautoProvisioning__BaseUrl=" + wf.URL, "WfautoProvisioning__ApiKey=k", "WfautoProvisioning__TimeoutSeconds=1",
		"Databases__MaxPerUser=1000", "Finisher__IntervalMillis=200",
		"RateLimit__PerIp=10000000-M", "RateLimit__PerUser=10000000-M", "RateLimit__Register=10000000-M", "RateLimit__Login=10000000-M",
	}
	var instances []*instance
	var ports []int
	for i := 0; i < replicas; i++ {
		in := &instance{port: freePort(t), env: env, bin: bin, log: logf}
		in.start(t)
		instances = append(instances, in)
		ports = append(ports, in.port)
	}
	defer func() {
		for _, in := range instances {
			in.kill()
		}
	}()
	c := &client{http: &http.Client{Timeout: 15 * time.Second}, ports: ports}

	// Accounts first (registration provisions a tenant database each).
	var users []user
	for i := 0; i < 8; i++ {
		status, data := c.do("POST", "/api/auth/register", "", map[string]any{"fullName": "Chaos", "email": fmt.Sprintf("chaos-%d-%s@example.test", i, testutil.RandomSuffix()), "password": "chaos-password-123"})
		require.Equal(t, http.StatusCreated, status)
		users = append(users, user{token: data["accessToken"].(string), id: int64(data["userId"].(float64))})
	}

	var mu sync.Mutex
	seen := map[string]*outcome{} // "kind:id" -> last success
	record := func(kind string, id int64, deleted bool) {
		mu.Lock()
		defer mu.Unlock()
		k := fmt.Sprintf("%s:%d", kind, id)
		if o, ok := seen[k]; ok && o.deleted {
			return
		}
		seen[k] = &outcome{kind: kind, id: id, deleted: deleted}
	}
	owned := func(kind string, uid int64) []int64 {
		mu.Lock()
		defer mu.Unlock()
		var ids []int64
		for _, o := range seen {
			if o.kind == kind && !o.deleted {
				ids = append(ids, o.id)
			}
		}
		return ids
	}

	// The killer: SIGKILL a random instance at random moments, restart it.
	stop := make(chan struct{})
	killed := atomic.Int64{}
	var kw sync.WaitGroup
	kw.Add(1)
	go func() {
		defer kw.Done()
		for killed.Load() < int64(kills) {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(200+rand.IntN(600)) * time.Millisecond):
			}
			in := instances[rand.IntN(len(instances))]
			in.kill()
			killed.Add(1)
			in.start(t)
		}
	}()

	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				u := users[i%len(users)]
				switch rand.IntN(6) {
				case 0, 1:
					if st, d := c.do("POST", "/api/me/databases", u.token, map[string]any{}); st == http.StatusCreated {
						record("database", int64(d["databaseInstanceId"].(float64)), false)
					}
				case 2:
					if ids := owned("database", 0); len(ids) > 0 {
						id := ids[rand.IntN(len(ids))]
						if st, _ := c.do("DELETE", fmt.Sprintf("/api/me/databases/%d", id), u.token, nil); st == http.StatusOK {
							record("database", id, true)
						}
					}
				case 3, 4:
					label := fmt.Sprintf("c%d-%s", i, testutil.RandomSuffix())
					if st, d := c.do("POST", "/api/me/dns", u.token, map[string]any{"label": label}); st == http.StatusCreated {
						record("dns", int64(d["id"].(float64)), false)
					}
				case 5:
					if st, d := c.do("POST", "/api/me/wfauto/provision", u.token, nil); st == http.StatusCreated {
						record("wfauto", int64(d["id"].(float64)), false)
					}
					if ids := owned("dns", 0); len(ids) > 0 {
						id := ids[rand.IntN(len(ids))]
						if st, _ := c.do("DELETE", fmt.Sprintf("/api/me/dns/%d", id), u.token, nil); st == http.StatusOK {
							record("dns", id, true)
						}
					}
				}
			}
		}()
	}
	for i := 0; i < ops; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	for killed.Load() < int64(kills) {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	kw.Wait()
	t.Logf("killed %d times, %d successes recorded", killed.Load(), len(seen))
	require.GreaterOrEqual(t, len(seen), ops/50, "enough requests succeeded between the kills for the checks below to mean something")

	// Settle: the finisher drives everything left in between (time "passes" for backoffs).
	conn, err := db.Connector(testutil.PackageDatabase(t))
	require.NoError(t, err)
	ctl := sql.OpenDB(conn)
	defer ctl.Close()
	inflight := func() int {
		var n int
		require.NoError(t, ctl.QueryRow(`SELECT
			(SELECT count(*) FROM database_instances WHERE status IN ('Provisioning','Deleting')) +
			(SELECT count(*) FROM dns_records WHERE status IN ('Pending','Revoking')) +
			(SELECT count(*) FROM dns_leftovers WHERE status = 'Sweeping') +
			(SELECT count(*) FROM wfauto_accounts WHERE status IN ('Pending','Deprovisioning'))`).Scan(&n))
		return n
	}
	fake.SetRandFault(nil)
	wf.SetRandFault(nil)
	deadline := time.Now().Add(90 * time.Second)
	for inflight() > 0 && time.Now().Before(deadline) {
		_, _ = ctl.Exec(`UPDATE database_instances SET next_attempt_at = now() WHERE status IN ('Provisioning','Deleting')`)
		_, _ = ctl.Exec(`UPDATE dns_records SET next_attempt_at = now() WHERE status IN ('Pending','Revoking')`)
		_, _ = ctl.Exec(`UPDATE dns_leftovers SET next_attempt_at = now() WHERE status = 'Sweeping'`)
		_, _ = ctl.Exec(`UPDATE wfauto_accounts SET next_attempt_at = now() WHERE status IN ('Pending','Deprovisioning')`)
		time.Sleep(500 * time.Millisecond)
	}
	require.Zero(t, inflight(), "the finisher settled every in-between state")

	// 1. Every success the client saw is there.
	for _, o := range seen {
		var status string
		switch o.kind {
		case "database":
			require.NoError(t, ctl.QueryRow("SELECT status FROM database_instances WHERE id = $1", o.id).Scan(&status))
			if o.deleted {
				assert.Equal(t, "Deleted", status, "database %d", o.id)
			} else {
				assert.Contains(t, []string{"Active", "Deleted"}, status, "database %d", o.id)
			}
		case "dns":
			require.NoError(t, ctl.QueryRow("SELECT status FROM dns_records WHERE id = $1", o.id).Scan(&status))
			if o.deleted {
				assert.Equal(t, "Revoked", status, "dns %d", o.id)
			} else {
				assert.Contains(t, []string{"Active", "Revoked"}, status, "dns %d", o.id)
			}
		case "wfauto":
			require.NoError(t, ctl.QueryRow("SELECT status FROM wfauto_accounts WHERE id = $1", o.id).Scan(&status))
			assert.Equal(t, "Active", status, "wfauto %d", o.id)
		}
	}

	// 2. DNS: one provider record per Active row, none without a row, nothing created twice.
	active := map[string]bool{}
	rows, err := ctl.Query("SELECT provider_record_id FROM dns_records WHERE status = 'Active'")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		active[id] = true
	}
	rows.Close()
	provider := fake.Records()
	for id := range provider {
		assert.True(t, active[id], "provider record %s has an Active row", id)
	}
	for id := range active {
		assert.Contains(t, provider, id, "Active row's provider record exists")
	}
	var everCreated int64
	require.NoError(t, ctl.QueryRow("SELECT count(*) FROM dns_records WHERE provider_record_id <> ''").Scan(&everCreated))
	assert.Equal(t, everCreated, fake.Creates(), "nothing created twice at the provider")

	// 3. Tenant databases: no database or role on the engine without its live row, and every live
	// row's database exists.
	live := map[string]bool{}
	rows, err = ctl.Query("SELECT database_name FROM database_instances WHERE status IN ('Active','Paused')")
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		live[n] = true
	}
	rows.Close()
	onEngine := map[string]bool{}
	for n := range engineNames() {
		if !before[n] {
			onEngine[n] = true
		}
	}
	for n := range onEngine {
		assert.True(t, live[n], "%s on the engine has a live row", n)
	}
	for n := range live {
		assert.True(t, onEngine[n], "live row %s exists on the engine", n)
	}

	// 4. wfauto: one cell account per local account, every Active one known to the cell.
	var accounts int
	require.NoError(t, ctl.QueryRow("SELECT count(*) FROM wfauto_accounts").Scan(&accounts))
	assert.LessOrEqual(t, wf.Creates(), accounts, "the cell never made two accounts for one local account")

	// 5. Failures keep their error.
	var silent int
	require.NoError(t, ctl.QueryRow(`SELECT
		(SELECT count(*) FROM dns_records WHERE status = 'Failed' AND error_message = '') +
		(SELECT count(*) FROM wfauto_accounts WHERE status = 'Failed' AND error_message = '') +
		(SELECT count(*) FROM database_instances WHERE status = 'Failed' AND last_error = '')`).Scan(&silent))
	assert.Zero(t, silent, "every Failed resource has its error stored")

	assert.Zero(t, c.five.Load(), "the API never answered 500")
	_ = context.Background()
}
