package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// Cluster is a private PostgreSQL server (initdb in a temporary directory, trust authentication
// on 127.0.0.1) for tests that stop, start or restart the server itself, which the machine's
// shared cluster must never be.
type Cluster struct {
	Port int
	t    testing.TB
	bin  string
	dir  string
	as   []string // runuser -u postgres -- when running as root (initdb refuses root)
}

// StartCluster initialises and starts a cluster on a free port; it is removed when the test ends.
// It fails the test when PostgreSQL's server binaries are missing (apt-get install -y postgresql).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("PostgreSQL server binaries not found under /usr/lib/postgresql (apt-get install -y postgresql)")
	}
	sort.Strings(bins)
	c := &Cluster{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "pgcluster")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() {
		_ = c.ctl("-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal("running as root needs the postgres user to run the server:", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.as = []string{"runuser", "-u", "postgres", "--"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if out, err := c.run(filepath.Join(c.bin, "initdb"), "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.Start()
	return c
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	argv := append(append([]string{}, c.as...), name)
	argv = append(argv, args...)
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}

func (c *Cluster) ctl(args ...string) error {
	args = append([]string{"-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60"}, args...)
	out, err := c.run(filepath.Join(c.bin, "pg_ctl"), args...)
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %v\n%s", args, err, out)
	}
	return nil
}

// Start starts the server (StartCluster already did) and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=off", c.Port, c.dir)
	if err := c.ctl("-o", opts, "start"); err != nil {
		c.t.Fatal(err)
	}
}

// Stop shuts the server down the way an operator's restart does ("fast": every session is
// terminated with SQLSTATE 57P01).
func (c *Cluster) Stop() {
	c.t.Helper()
	if err := c.ctl("-m", "fast", "stop"); err != nil {
		c.t.Fatal(err)
	}
}

// URL is the connection URL of database name on this cluster.
func (c *Cluster) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, name)
}
