package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/poll"
)

// Mode is how a Pair's primary waits for its standby at commit.
type Mode string

// The replication modes of a Pair.
const (
	// Sync: a commit returns once the standby has the WAL on disk
	// (synchronous_standby_names naming the standby, synchronous_commit =
	// on).
	Sync Mode = "sync"
	// RemoteApply: a commit returns once the standby has replayed it, so a
	// read on the standby sees it (synchronous_commit = remote_apply).
	RemoteApply Mode = "remote_apply"
	// Async: a commit returns at once; the standby follows when it can
	// (synchronous_standby_names empty).
	Async Mode = "async"
)

// Pair is a PostgreSQL primary and a streaming hot standby cloned from it
// (pg_basebackup -R -X stream), each a PG of its own. The standby's
// replication connection goes through a netfault proxy, so CutReplication
// can hold it behind. After Promote the standby is the primary and the
// former primary is Old until FenceOld brings it back as a standby.
type Pair struct {
	tb    testing.TB
	mode  Mode
	nodes [2]*PG
	// primary is the index of the current primary; old that of a former
	// primary not fenced yet (-1 when none).
	primary, old int
	proxy        *netfault.Proxy
	// PromoteTook is how long the last Promote took (pg_ctl promote until
	// the server left recovery).
	PromoteTook time.Duration
}

// SyncStandbyNames is the synchronous_standby_names of a synchronous
// pair: the two servers by their application_name (a server never streams
// from itself, so the list fits whichever is the primary). Not '*', which
// would also match every other replication connection, a logical relay's
// included.
const SyncStandbyNames = `FIRST 1 ("pg-1", "pg-2")`

// LogicalOpts are the server options a logical relay needs on a pair
// (StartPair's opts): its slots and walsenders beside the standby's, and
// a lost walsender's slot freed within 10 s.
var LogicalOpts = []string{"-c", "wal_level=logical", "-c", "max_replication_slots=10", "-c", "max_wal_senders=12",
	"-c", "max_slot_wal_keep_size=1GB", "-c", "wal_sender_timeout=10s"}

// StartPair starts a primary and a standby in dir ("" for temp folders) in
// mode, and waits until the standby streams (and, in the synchronous
// modes, is the synchronous one). opts are extra server options of both
// servers ("-c", "name=value", ...), after the pair's own.
func StartPair(tb testing.TB, dir string, mode Mode, opts ...string) *Pair {
	tb.Helper()
	var syncConf []string
	names := "synchronous_standby_names = " + quoteLiteral(SyncStandbyNames)
	switch mode {
	case Sync:
		syncConf = []string{names, "synchronous_commit = on"}
	case RemoteApply:
		syncConf = []string{names, "synchronous_commit = remote_apply"}
	case Async:
	default:
		tb.Fatalf("StartPair: unknown mode %q", mode)
	}
	// Both servers have the same settings: either may be the primary.
	opts = append([]string{"-c", "wal_level=replica", "-c", "max_wal_senders=5", "-c", "hot_standby=on",
		"-c", "wal_keep_size=256MB", "-c", "wal_receiver_status_interval=1s", "-c", "wal_retrieve_retry_interval=1s"}, opts...)
	p := &Pair{tb: tb, mode: mode, old: -1}
	dir = workDir(tb, dir, "paysuite-pg-pair-")
	p.nodes[0] = newPG(tb, dir, "pg-1", opts...)
	p.nodes[1] = newPG(tb, dir, "pg-2", opts...)
	p.nodes[0].initdb()
	// The synchronous settings go to postgresql.auto.conf (which the
	// standby's copy inherits), not to the command line, which would win
	// over the ALTER SYSTEM of a promotion.
	if len(syncConf) > 0 {
		f, err := os.OpenFile(filepath.Join(p.nodes[0].Data(), "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0o600) //nolint:gosec // the test's own server
		if err != nil {
			tb.Fatal(err)
		}
		_, err = f.WriteString(strings.Join(syncConf, "\n") + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	p.nodes[0].Start()
	p.proxy = netfault.NewProxy(tb, p.nodes[0].Addr())
	host, port, _ := strings.Cut(p.proxy.Addr(), ":")
	conninfo := fmt.Sprintf("host=%s port=%s user=postgres application_name=%s", host, port, p.nodes[1].name)
	if out, err := asPG(filepath.Join(p.nodes[1].bin, "pg_basebackup"), "-d", conninfo, "-D", p.nodes[1].Data(),
		"-R", "-X", "stream", "-c", "fast").CombinedOutput(); err != nil {
		tb.Fatalf("pg_basebackup: %v: %s", err, out)
	}
	p.nodes[1].Start()
	p.WaitStreaming()
	return p
}

// Mode is the pair's replication mode.
func (p *Pair) Mode() Mode { return p.mode }

// Primary is the current primary.
func (p *Pair) Primary() *PG { return p.nodes[p.primary] }

// Standby is the server that is not the current primary: the standby, or
// the former primary after Promote.
func (p *Pair) Standby() *PG { return p.nodes[1-p.primary] }

// URL is the multi-host URL of database db on the pair, as the services'
// DATABASE_URL names it: both servers, target_session_attrs=read-write so
// that a connection lands only on the one taking writes, and a connect
// timeout per host so that a hung first host does not keep a connection
// from trying the second. app tags the connections when not "".
func (p *Pair) URL(db, app string) string {
	u := fmt.Sprintf("postgres://postgres@%s,%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		p.nodes[0].Addr(), p.nodes[1].Addr(), db)
	if app != "" {
		u += "&application_name=" + app
	}
	return u
}

// CreateDB creates database db on the primary (the standby replays it).
func (p *Pair) CreateDB(db string) { p.Primary().CreateDB(db) }

// WaitStreaming waits until the primary's WAL sender streams to the
// standby (in the synchronous modes: as the synchronous standby). Other
// replication connections (a logical relay's) are not the standby's: it is
// found by its application_name.
func (p *Pair) WaitStreaming() {
	p.tb.Helper()
	poll.Until(p.tb, time.Minute, "the standby streaming", func() (bool, string) {
		var state, syncState string
		err := p.query(p.Primary(), `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = `+quoteLiteral(p.Standby().name),
			&state, &syncState)
		if err != nil {
			return false, err.Error()
		}
		want := "async"
		if p.mode != Async {
			want = "sync"
		}
		return state == "streaming" && syncState == want, state + "/" + syncState
	})
}

// query runs one query on server s alone and scans its one row.
func (p *Pair) query(s *PG, sql string, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres", ""))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// KillPrimary sends SIGKILL to the primary's processes (a host crash).
func (p *Pair) KillPrimary() { p.Primary().Kill() }

// StopPrimary sends SIGSTOP to the primary's processes: the server hangs
// with its connections open, as a host that froze.
func (p *Pair) StopPrimary() { p.Primary().Signal(syscall.SIGSTOP) }

// ContOld sends SIGCONT to the former primary: unfenced, it takes writes
// again on its connections as if it were still the primary.
func (p *Pair) ContOld() {
	p.tb.Helper()
	if p.old < 0 {
		p.tb.Fatal("ContOld: no former primary (Promote first)")
	}
	p.nodes[p.old].Signal(syscall.SIGCONT)
}

// Promote promotes the standby (pg_ctl promote) and waits until it takes
// writes; the former primary becomes the Standby (not fenced: see
// FenceOld). In the synchronous modes the new primary's
// synchronous_standby_names is cleared first, as a failover manager does
// when no standby is left, or its commits would wait for a standby that is
// not there. It returns (and PromoteTook keeps) how long pg_ctl promote
// took until the server left recovery.
func (p *Pair) Promote() time.Duration {
	p.tb.Helper()
	s := p.Standby()
	if p.mode != Async {
		// Cleared before the promotion, or the first commits on the new
		// primary would wait for a standby that is not there (ALTER SYSTEM
		// only writes a file, which a standby allows).
		p.alterSystem(s, "RESET synchronous_standby_names")
		poll.Until(p.tb, 30*time.Second, s.name+" reloaded without synchronous standbys", func() (bool, string) {
			var v string
			if err := p.query(s, `SHOW synchronous_standby_names`, &v); err != nil {
				return false, err.Error()
			}
			return v == "", "synchronous_standby_names = " + v
		})
	}
	began := time.Now()
	if out, err := s.pgctl("-w", "-t", "60", "promote").CombinedOutput(); err != nil {
		p.tb.Fatalf("promote %s: %v: %s\n%s", s.name, err, out, s.LogTail())
	}
	poll.Until(p.tb, time.Minute, s.name+" out of recovery", func() (bool, string) {
		var inRecovery bool
		if err := p.query(s, `SELECT pg_is_in_recovery()`, &inRecovery); err != nil {
			return false, err.Error()
		}
		return !inRecovery, "in recovery"
	})
	p.PromoteTook = time.Since(began)
	p.old, p.primary = p.primary, 1-p.primary
	return p.PromoteTook
}

// SetSyncStandbyNames sets the primary's synchronous_standby_names to v
// (ALTER SYSTEM, reloaded) and waits until the server shows it.
func (p *Pair) SetSyncStandbyNames(v string) {
	p.tb.Helper()
	s := p.Primary()
	p.alterSystem(s, "SET synchronous_standby_names = "+quoteLiteral(v))
	poll.Until(p.tb, 30*time.Second, s.name+" reloaded with synchronous_standby_names = "+v, func() (bool, string) {
		var got string
		if err := p.query(s, `SHOW synchronous_standby_names`, &got); err != nil {
			return false, err.Error()
		}
		return got == v, "synchronous_standby_names = " + got
	})
}

// alterSystem runs ALTER SYSTEM cmd on s and reloads its configuration.
func (p *Pair) alterSystem(s *PG, cmd string) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres", ""))
	if err != nil {
		p.tb.Fatalf("connect %s: %v", s.name, err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "ALTER SYSTEM "+cmd); err != nil {
		p.tb.Fatalf("ALTER SYSTEM %s on %s: %v", cmd, s.name, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		p.tb.Fatalf("reload %s: %v", s.name, err)
	}
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// StopStandby shuts the standby down cleanly; in the synchronous modes the
// primary's commits then wait until StartStandby.
func (p *Pair) StopStandby() { p.Standby().StopFast() }

// StartStandby starts the standby again; it resumes streaming.
func (p *Pair) StartStandby() { p.Standby().Start() }

// CutReplication cuts the standby's replication connection (the proxy it
// streams through closes it and refuses new ones): the standby stays
// behind, with nothing more than it had, until RestoreReplication.
func (p *Pair) CutReplication() { p.proxy.Cut() }

// RestoreReplication lets the standby reconnect and catch up.
func (p *Pair) RestoreReplication() { p.proxy.Restore() }

// FenceOld makes sure the former primary takes no write: it is killed
// (SIGKILL of every process, whether running or stopped) and started
// again as a hot standby of the new primary (standby.signal, its
// primary_conninfo pointing at the new primary), so every write on it is
// refused with SQLSTATE 25006 and target_session_attrs=read-write skips
// it. If its WAL went past the point the new primary was promoted at (an
// asynchronous pair), it cannot follow the new timeline and stays a
// read-only copy until rebuilt (pg_rewind or pg_basebackup): still fenced.
func (p *Pair) FenceOld() {
	p.tb.Helper()
	if p.old < 0 {
		p.tb.Fatal("FenceOld: no former primary (Promote first)")
	}
	old, cur := p.nodes[p.old], p.Primary()
	if len(old.pids()) > 0 {
		old.Kill()
	}
	if err := os.WriteFile(filepath.Join(old.Data(), "standby.signal"), nil, 0o600); err != nil {
		p.tb.Fatal(err)
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", cur.port, old.name)
	f, err := os.OpenFile(filepath.Join(old.Data(), "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0o600) //nolint:gosec // the test's own server
	if err != nil {
		p.tb.Fatal(err)
	}
	_, err = fmt.Fprintf(f, "primary_conninfo = %s\nprimary_slot_name = ''\n", quoteLiteral(conninfo))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		p.tb.Fatal(err)
	}
	if os.Getuid() == 0 {
		_ = exec.Command("chown", "postgres:", filepath.Join(old.Data(), "standby.signal")).Run() //nolint:gosec,noctx // a quick chown of the test's own file
	}
	old.Start()
	p.old = -1
}
