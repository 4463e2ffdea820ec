package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/test/support/poll"
)

// PG is one PostgreSQL server of the test's own, run as the postgres user
// with fsync and full page writes on (and synchronous_commit at its default,
// on), as production runs. Its port stays the same across restarts.
type PG struct {
	tb   testing.TB
	name string
	bin  string
	dir  string
	port int
	// opts are extra server options ("-c name=value" pairs) of every start.
	opts []string
	// started: the server has run once, so its port is known to clients.
	started bool
}

// pgBin is the folder of the newest installed PostgreSQL server binaries.
func pgBin(tb testing.TB) string {
	tb.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		tb.Fatal("PostgreSQL server binaries missing (/usr/lib/postgresql/*/bin): install the 'postgresql' package")
	}
	sort.Strings(bins)
	return filepath.Dir(bins[len(bins)-1])
}

// asPG runs a PostgreSQL tool as the postgres user when the test is root
// (the server refuses to run as root).
func asPG(args ...string) *exec.Cmd {
	if os.Getuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec,noctx // the test's own command lines
	cmd.Dir = "/"
	return cmd
}

// newPG makes the folder of a server named name under parent ("" for a
// temp folder) and stops the server when the test ends, without starting
// it.
func newPG(tb testing.TB, parent, name string, opts ...string) *PG {
	tb.Helper()
	s := &PG{tb: tb, name: name, bin: pgBin(tb), port: freePort(tb, EnvPGPorts), opts: opts}
	if parent == "" {
		s.dir = workDir(tb, "", "paysuite-pg-"+name+"-")
	} else {
		// The postgres user must be able to reach its folder inside parent.
		if err := os.Chmod(parent, 0o755); err != nil { //nolint:gosec // a test folder the postgres user must traverse
			tb.Fatal(err)
		}
		s.dir = workDir(tb, filepath.Join(parent, name), "")
	}
	if err := os.Chmod(s.dir, 0o700); err != nil { //nolint:gosec // a folder: the postgres user must enter it
		tb.Fatal(err)
	}
	if os.Getuid() == 0 {
		if out, err := exec.Command("chown", "postgres:", s.dir).CombinedOutput(); err != nil { //nolint:gosec,noctx // a quick chown of the test's folder
			tb.Fatalf("chown %s: %v: %s", s.dir, err, out)
		}
	}
	tb.Cleanup(func() {
		_ = syscall.Kill(s.pid(), syscall.SIGCONT) // a stopped server cannot shut down
		_ = asPG(filepath.Join(s.bin, "pg_ctl"), "-D", s.Data(), "-m", "immediate", "-w", "stop").Run()
	})
	return s
}

// StartPG initialises and starts a server named name in a temp folder.
// opts are extra server options ("-c", "name=value", ...).
func StartPG(tb testing.TB, name string, opts ...string) *PG {
	tb.Helper()
	s := newPG(tb, "", name, opts...)
	s.initdb()
	s.Start()
	return s
}

func (s *PG) initdb() {
	s.tb.Helper()
	if out, err := asPG(filepath.Join(s.bin, "initdb"), "-D", s.Data(), "-A", "trust", "-U", "postgres",
		"--encoding=UTF8", "--locale=C").CombinedOutput(); err != nil {
		s.tb.Fatalf("initdb %s: %v: %s", s.name, err, out)
	}
}

// Name is the server's name in the test's messages.
func (s *PG) Name() string { return s.name }

// Port is the server's port on 127.0.0.1.
func (s *PG) Port() int { return s.port }

// Addr is host:port.
func (s *PG) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Data is the server's data directory.
func (s *PG) Data() string { return filepath.Join(s.dir, "data") }

// DSN is the URL of database db on this server alone, tagged with the
// application name app (which pg_stat_activity shows) when not "".
func (s *PG) DSN(db, app string) string {
	u := fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), db)
	if app != "" {
		u += "&application_name=" + app
	}
	return u
}

func (s *PG) serverOpts() string {
	return strings.Join(append([]string{"-p", strconv.Itoa(s.port), "-k", s.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=on", "-c", "full_page_writes=on", "-c", "max_connections=300"}, s.opts...), " ")
}

// Start starts the server and waits until it accepts connections. A first
// start whose port was taken meanwhile (a port found free can be handed to
// a client socket before the server binds it) moves to another free port;
// later starts keep the port clients know.
func (s *PG) Start() {
	s.tb.Helper()
	for attempt := 1; ; attempt++ {
		out, err := s.pgctl("-l", s.logFile(), "-w", "-t", "120", "start", "-o", s.serverOpts()).CombinedOutput()
		if err == nil {
			s.started = true
			return
		}
		if s.started || attempt == 5 || !strings.Contains(s.LogTail(), "Address already in use") {
			s.tb.Fatalf("start PostgreSQL %s: %v: %s\n%s", s.name, err, out, s.LogTail())
		}
		s.port = freePort(s.tb, EnvPGPorts)
	}
}

// RestartImmediate is `pg_ctl restart -m immediate`: a crash (no
// checkpoint, every connection cut) and crash recovery.
func (s *PG) RestartImmediate() {
	s.tb.Helper()
	if out, err := s.pgctl("-l", s.logFile(), "-m", "immediate", "-w", "-t", "120", "restart", "-o", s.serverOpts()).CombinedOutput(); err != nil {
		s.tb.Fatalf("restart PostgreSQL %s: %v: %s\n%s", s.name, err, out, s.LogTail())
	}
}

// StopImmediate stops the server as a crash would.
func (s *PG) StopImmediate() {
	s.tb.Helper()
	if out, err := s.pgctl("-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		s.tb.Fatalf("stop PostgreSQL %s: %v: %s", s.name, err, out)
	}
}

// StopFast is a clean shutdown (`pg_ctl stop -m fast`).
func (s *PG) StopFast() {
	s.tb.Helper()
	if out, err := s.pgctl("-m", "fast", "-w", "-t", "60", "stop").CombinedOutput(); err != nil {
		s.tb.Fatalf("stop PostgreSQL %s: %v: %s", s.name, err, out)
	}
}

// Kill sends SIGKILL to the postmaster and every backend, as a crashed
// host, and waits until they are gone.
func (s *PG) Kill() {
	s.tb.Helper()
	pids := s.pids()
	if len(pids) == 0 {
		s.tb.Fatalf("kill PostgreSQL %s: not running", s.name)
	}
	// Every process at once, as a host crash: a backend left alive (more
	// so a stopped one resumed) could still finish a commit.
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
		_ = syscall.Kill(p, syscall.SIGCONT) // a stopped process is reaped at once
	}
	if !poll.Wait(30*time.Second, poll.Interval, func() bool {
		for _, p := range pids {
			if syscall.Kill(p, 0) == nil {
				return false
			}
		}
		return true
	}) {
		s.tb.Fatalf("PostgreSQL %s: processes still there 30 s after SIGKILL", s.name)
	}
}

// pids is the postmaster's pid, then its children's; nil when not running.
func (s *PG) pids() []int {
	pid := s.pid()
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return nil
	}
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(pid)).Output() //nolint:gosec,noctx // a quick lookup of a pid
	pids := []int{pid}
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// Signal sends sig to the postmaster and every backend of the server: with
// SIGSTOP the whole server hangs (connections stay open, nothing answers),
// SIGCONT resumes it.
func (s *PG) Signal(sig syscall.Signal) {
	s.tb.Helper()
	pids := s.pids()
	if len(pids) == 0 {
		s.tb.Fatalf("signal PostgreSQL %s: not running", s.name)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

// pid is the postmaster's pid from postmaster.pid, or 0.
func (s *PG) pid() int {
	b, err := os.ReadFile(filepath.Join(s.Data(), "postmaster.pid")) //nolint:gosec // the test's own file
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

func (s *PG) pgctl(args ...string) *exec.Cmd {
	return asPG(append([]string{filepath.Join(s.bin, "pg_ctl"), "-D", s.Data()}, args...)...)
}

func (s *PG) logFile() string { return filepath.Join(s.dir, "postgres.log") }

// LogTail is the end of the server's log.
func (s *PG) LogTail() string {
	b, _ := os.ReadFile(s.logFile()) //nolint:gosec // the test's own log
	return tail(b, 30)
}

// CreateDB creates database db.
func (s *PG) CreateDB(db string) {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres", ""))
	if err != nil {
		s.tb.Fatalf("connect %s: %v", s.name, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		s.tb.Fatalf("create database %s: %v", db, err)
	}
}
