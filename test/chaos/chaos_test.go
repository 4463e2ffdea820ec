//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/notifications/webhook"
	"github.com/paysuite/payments/test/chaos/history"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/poll"
	"github.com/paysuite/payments/test/support/repo"
)

var (
	flagRate      = flag.Int("chaos.rate", 50, "transfers per second of the open-loop load")
	flagDBStop    = flag.Duration("chaos.dbstop", 60*time.Second, "how long the transfers database stays stopped")
	flagDown      = flag.Duration("chaos.down", 6*time.Second, "how long a killed service stays down before its restart")
	flagTakeover  = flag.Duration("chaos.takeover-max", 0, "the longest accepted relay takeover (default 1s with -chaos.relay=polling, 2s with logical)")
	flagBrokerRec = flag.Duration("chaos.broker-recovery-max", 8*time.Second,
		"the longest accepted time from the restarted broker being ready to the first settled transfer: when no result is in flight past antifraud, the first crosses the three hops after antifraud's consumer is back (3.8 to 4.4 s from the broker's return to its first decision on this 2-core machine); a send held until the broker is back took 16 s")
	flagTerminal = flag.Duration("chaos.terminal-within", 30*time.Second, "every transfer is terminal within this long of the last fault")
	flagKeepLogs = flag.String("chaos.logs", "", "a folder that receives the services' logs (default: a temporary folder, printed on failure)")
)

const webhookSecret = "chaos-webhook-secret-0123456789abcdef" //nolint:gosec // a test's secret

// topicPartitions of every topic the test creates.
const topicPartitions = 4

// fault is one injected fault and what it caused.
type fault struct {
	name     string
	at       time.Time     // injected
	restored time.Time     // the dependency or process was back
	recovery time.Duration // from at to the probe transfer terminal
	probeKey string
	want     []string // alerts that must fire, "alertname{job...}"
	fired    []string
	note     string
	// hitsNotifications: the fault can interrupt notifications between a
	// webhook and its record (a kill, its database crashing).
	hitsNotifications bool
	// What the fault does to the clients, for the minimums its window
	// must show (expectations): a transfers instance or its database down
	// (POSTs of unknown outcome), the transfers database unable to answer
	// reads, the ledger's database unable to give a snapshot, writes cut
	// into at its start.
	transfersDown, noReads, noSnapshots, cutsWrites bool
}

// receiver is the customers' webhook endpoint: it checks signatures,
// counts deliveries per event id (and records each in the history) and
// answers 503 to the first attempt of one event in ten, so the
// notification retry topics carry records.
type receiver struct {
	srv   *httptest.Server
	rec   *history.Recorder
	mu    sync.Mutex
	got   map[string]int       // event id -> deliveries answered 204
	first map[string]time.Time // event id -> first delivery answered 204
	dups  []time.Time          // of each duplicate: its event's first delivery
	bad   []string
	seen  map[string]bool
}

func newReceiver(tb testing.TB, rec *history.Recorder) *receiver {
	r := &receiver{rec: rec, got: map[string]int{}, first: map[string]time.Time{}, seen: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	r.mu.Lock()
	defer r.mu.Unlock()
	// Deduplicate on the signed body's event id, as receivers must.
	p, err := webhook.VerifyPayload([]byte(webhookSecret), req.Header.Get(webhook.HeaderSignature), body, time.Now(), webhook.DefaultTolerance)
	if err != nil {
		r.bad = append(r.bad, fmt.Sprintf("event %s: %v", req.Header.Get(webhook.HeaderEventID), err))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := p.EventID
	if !r.seen[id] && len(id) > 0 && id[len(id)-1] == '0' {
		r.seen[id] = true
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.seen[id] = true
	r.got[id]++
	r.rec.Webhook(time.Now(), history.Webhook{EventID: id})
	if r.got[id] == 1 {
		r.first[id] = time.Now()
	} else {
		r.dups = append(r.dups, r.first[id])
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) counts() (events, dups int, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.got {
		events++
		if n > 1 {
			dups += n - 1
		}
	}
	return events, dups, append([]string(nil), r.bad...)
}

// suite is everything the test runs.
type suite struct {
	t      *testing.T
	kafka  *cluster.KafkaCluster
	pgA    *cluster.PG // ledger, antifraud, notifications
	pgB    *cluster.PG // transfers (the one stopped for a while)
	procs  map[string]*proc
	prom   *promServer
	recv   *receiver
	bearer string
	minter string // the bearer of deposits (contas:depositar only)
	// prober is the bearer of the faults' probe transfers: a client of its
	// own (chaos-probe), so that admission control's fair share serves it
	// however many of the load's own requests wait for a retry.
	prober   string
	topics   events.Topics
	transfer *pgxpool.Pool // the test's own pools, application_name chaos-test
	ledger   *pgxpool.Pool
	notify   *pgxpool.Pool
	kc       *kafka.Client
	writer   *kafka.Writer
	load     *load
	faults   []*fault
	// The run's history (test/chaos/history): every client operation, snapshot,
	// record, webhook and fault, checked at the end.
	rec         *history.Recorder
	historyPath string
	snapsTaken  int // balance snapshots during the load
	snapsFailed int // and those that failed (the ledger's database down)

	// injected: the anomalies -chaos.inject put into the run, which the
	// checker must report as exactly these.
	injected []history.Anomaly

	// TestChaosCluster's PostgreSQL pairs, in place of pgA and pgB.
	pairA, pairB *cluster.Pair

	// failed holds every failed check's message, logged again as the
	// test's last lines (recap): a long run's tail then names them.
	failed []string
}

// errorf fails the test with a message that recap repeats at the end.
func (s *suite) errorf(format string, args ...any) {
	s.t.Helper()
	msg := fmt.Sprintf(format, args...)
	s.failed = append(s.failed, msg)
	s.t.Error(msg)
}

// recap logs the failed checks once more, after every figure and table.
func (s *suite) recap() {
	if len(s.failed) == 0 {
		return
	}
	s.t.Logf("%d failed checks:\n  %s", len(s.failed), strings.Join(s.failed, "\n  "))
}

func TestChaos(t *testing.T) {
	began := time.Now()
	if *flagRelay != "polling" && *flagRelay != "logical" {
		t.Fatalf("-chaos.relay=%q: want polling or logical", *flagRelay)
	}
	root := repo.Path(t)
	logDir := *flagKeepLogs
	if logDir == "" {
		logDir = t.TempDir()
	}
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs: %s", logDir)
		}
	})
	binDir := t.TempDir()

	// Infrastructure, in parallel with the build.
	var wg sync.WaitGroup
	var buildErr error
	wg.Go(func() { buildErr = buildBinaries(root, binDir) })
	s := &suite{t: t, topics: events.DefaultTopics, procs: map[string]*proc{}}
	s.openHistory(logDir)
	s.kafka = cluster.StartKafka(t, "", 1)
	// The logical relay's needs (-chaos.relay=logical), harmless to the
	// polling relay; a lost walsender frees its slot within 10 s.
	logical := []string{"-c", "wal_level=logical", "-c", "max_replication_slots=10", "-c", "max_wal_senders=10",
		"-c", "max_slot_wal_keep_size=1GB", "-c", "wal_sender_timeout=10s"}
	s.pgA = cluster.StartPG(t, "pg-a", logical...)
	s.pgB = cluster.StartPG(t, "pg-b", logical...)
	wg.Wait()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	t.Logf("infrastructure up in %s: Kafka %s, PostgreSQL %d (ledger, antifraud, notifications) and %d (transfers), fsync on",
		time.Since(began).Round(time.Millisecond), s.kafka.Addr(1), s.pgA.Port(), s.pgB.Port())

	s.createTopics()
	for _, db := range []string{"ledger", "antifraud", "notifications"} {
		s.pgA.CreateDB(db)
	}
	s.pgB.CreateDB("transfers")
	s.kc = &kafka.Client{Addr: kafka.TCP(s.kafka.Addr(1)), Timeout: 30 * time.Second}
	s.writer = &kafka.Writer{Addr: kafka.TCP(s.kafka.Addr(1)), Balancer: samePartition{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond}
	t.Cleanup(func() { _ = s.writer.Close() })

	iss := authtest.New(t)
	s.bearer = iss.Bearer(t, "chaos-client", authtest.AllScopes...)
	s.minter = iss.Bearer(t, "chaos-tesouraria", authtest.DepositScopes...)
	s.prober = iss.Bearer(t, probeClient, authtest.AllScopes...)
	s.recv = newReceiver(t, s.rec)

	env := func(p *proc, dsn string, extra map[string]string) {
		m := map[string]string{
			"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "TMPDIR": os.TempDir(),
			"HTTP_ADDR":            "127.0.0.1:" + strconv.Itoa(p.port),
			"DATABASE_URL":         dsn,
			"DATABASE_MAX_CONNS":   "10",
			"KAFKA_BROKERS":        s.kafka.Addr(1),
			"LOG_FORMAT":           "json",
			"LOG_LEVEL":            "info",
			"OUTBOX_POLL_INTERVAL": "100ms",
			"OUTBOX_RELAY":         *flagRelay,
		}
		for k, v := range iss.Env() {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		for k, v := range m {
			p.env = append(p.env, k+"="+v)
		}
	}
	add := func(name, job, dsn string, extra map[string]string) {
		p := &proc{name: name, job: job, bin: filepath.Join(binDir, job), port: freePort(t), log: filepath.Join(logDir, name+".log")}
		env(p, dsn, extra)
		s.procs[name] = p
		t.Cleanup(p.kill9)
	}
	add("transfers-a", "transfers", s.pgB.DSN("transfers", "transfers-a"), nil)
	add("transfers-b", "transfers", s.pgB.DSN("transfers", "transfers-b"), nil)
	add("ledger", "ledger", s.pgA.DSN("ledger", "ledger"), nil)
	add("antifraud", "antifraud", s.pgA.DSN("antifraud", "antifraud"), map[string]string{
		// The load's busy accounts would trip the velocity rules.
		"ANTIFRAUD_VELOCITY_MAX_COUNT": "0", "ANTIFRAUD_VELOCITY_MAX_CENTS": "0",
	})
	add("notifications", "notifications", s.pgA.DSN("notifications", "notifications"), map[string]string{
		"NOTIFY_CHANNEL":      "webhook",
		"WEBHOOK_DEFAULT_URL": s.recv.srv.URL + "/webhooks/paysuite",
		"WEBHOOK_SECRET":      webhookSecret,
		"WEBHOOK_TIMEOUT":     "5s",
		"WEBHOOK_ALLOW_HTTP":  "true", // the test receiver listens on plain HTTP
	})
	// transfers-a first: it migrates the shared database alone.
	s.procs["transfers-a"].start(t)
	var startWG sync.WaitGroup
	startErrs := make(chan error, 4)
	for _, n := range []string{"transfers-b", "ledger", "antifraud", "notifications"} {
		startWG.Go(func() {
			if err := s.procs[n].startErr(); err != nil {
				startErrs <- err
			}
		})
	}
	startWG.Wait()
	close(startErrs)
	for err := range startErrs {
		t.Fatal(err)
	}
	s.startProm(root)
	s.transfer = s.pool(s.pgB.DSN("transfers", "chaos-test"))
	s.ledger = s.pool(s.pgA.DSN("ledger", "chaos-test"))
	s.notify = s.pool(s.pgA.DSN("notifications", "chaos-test"))
	t.Logf("suite up in %s (5 processes, Prometheus %s)", time.Since(began).Round(time.Millisecond), s.prom.url)

	pick := s.accounts()
	s.load = newLoad([]string{s.procs["transfers-a"].url(), s.procs["transfers-b"].url()}, s.bearer, s.rec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		s.load.run(ctx, stop, *flagRate, pick)
	}()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		s.load.read(ctx, stop, *flagReads)
	}()
	snapsDone := make(chan struct{})
	go func() {
		defer close(snapsDone)
		s.snapsTaken, s.snapsFailed = s.snapshots(ctx, stop)
	}()
	loadStart := time.Now()

	s.settle(10 * time.Second) // traffic before the first fault
	s.inject()
	takeover := s.runFaults()
	// The load stops with the last fault: every transfer must then be
	// terminal within flagTerminal of it.
	last := s.faults[len(s.faults)-1]
	close(stop)
	<-loadDone
	<-readDone // its last GETs are in the load's wait group, waited for below
	<-snapsDone
	loadEnd := time.Now()
	s.awaitRecovery(last, time.Minute)
	s.load.wait()
	t.Logf("load stopped after %s; every submission answered", loadEnd.Sub(loadStart).Round(time.Second))
	s.awaitHolds(true)
	lastFault := last.restored

	s.check(lastFault, takeover)
	t.Logf("chaos test took %s", time.Since(began).Round(time.Second))
	s.recap()
}

func (s *suite) pool(dsn string) *pgxpool.Pool {
	s.t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(p.Close)
	return p
}

func (s *suite) createTopics() {
	s.t.Helper()
	specs := s.suiteTopics(1)
	for i := range specs {
		specs[i].Partitions = topicPartitions
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, broker.Config{Brokers: []string{s.kafka.Addr(1)}}, specs); err != nil {
		s.t.Fatalf("create topics: %v", err)
	}
}

// accounts opens and funds the load's accounts and returns the load's
// transfer picker: random pairs of one currency, 3% from an unfunded
// account (rejected by the ledger).
func (s *suite) accounts() func() transferReq {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &http.Client{Timeout: 30 * time.Second}
	ledger := s.procs["ledger"].url()
	byCur := map[string][]string{}
	open := func(id, cur string, fund int64) {
		body := map[string]string{"id": id, "moeda": cur}
		if strings.HasPrefix(id, probeAccount) {
			body["titular"] = probeClient
		}
		if err := api(ctx, c, s.bearer, http.MethodPost, ledger+"/contas", "", body, nil, http.StatusCreated); err != nil {
			s.t.Fatal(err)
		}
		if fund > 0 {
			key, invoked := uuid.NewString(), time.Now()
			if err := api(ctx, c, s.minter, http.MethodPost, ledger+"/contas/"+id+"/depositos", key,
				map[string]int64{"valorEmCentavos": fund}, nil, http.StatusCreated); err != nil {
				s.t.Fatal(err)
			}
			s.rec.Deposit(invoked, history.OK, key, history.Deposit{Account: id, Currency: cur, AmountCents: fund})
		}
	}
	for i := range 20 {
		id := fmt.Sprintf("CH-BRL-%02d", i)
		open(id, "BRL", 1_000_000_000)
		byCur["BRL"] = append(byCur["BRL"], id)
	}
	for i := range 10 {
		id := fmt.Sprintf("CH-USD-%02d", i)
		open(id, "USD", 1_000_000_000)
		byCur["USD"] = append(byCur["USD"], id)
	}
	open("CH-BRL-EMPTY", "BRL", 0)
	open(probeAccount+"00", "BRL", 1_000_000_000)
	open(probeAccount+"01", "BRL", 0)
	return func() transferReq {
		cur := "BRL"
		if rand.IntN(3) == 0 {
			cur = "USD"
		}
		ids := byCur[cur]
		from := ids[rand.IntN(len(ids))]
		to := ids[rand.IntN(len(ids))]
		for to == from {
			to = ids[rand.IntN(len(ids))]
		}
		if cur == "BRL" && rand.IntN(33) == 0 {
			from = "CH-BRL-EMPTY"
		}
		return transferReq{From: from, To: to, AmountCents: 1 + rand.Int64N(500), Currency: cur}
	}
}

// settle lets traffic run for d while checking that no process died
// unasked.
func (s *suite) settle(d time.Duration) {
	s.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, p := range s.procs {
			if p.exitedEarly() {
				s.t.Fatalf("%s exited by itself:\n%s", p.name, p.logTail(40))
			}
		}
		time.Sleep(200 * time.Millisecond) // paced traffic, not a wait for a condition
	}
}

// probeClient is the client of the faults' probe transfers, and
// probeAccount the prefix of its two accounts (it owns them: only its
// transfers may debit them).
const (
	probeClient  = "chaos-probe"
	probeAccount = "CH-PROBE-"
)

// probe submits a transfer at a fault's start, as the probe client, and
// records its key; the fault's recovery is when it is terminal. The load's
// client may have thousands of its own requests waiting to be retried
// while the door sheds; the probe, another client, gets its own fair share
// of the admitted rate, so its time to terminal is the flow's recovery,
// not its place in that queue.
func (s *suite) probe(f *fault) {
	f.probeKey = uuid.NewString()
	r := transferReq{From: probeAccount + "00", To: probeAccount + "01", AmountCents: 1, Currency: "BRL"}
	s.load.wg.Go(func() { s.load.submitAs(context.Background(), s.prober, time.Second, f.probeKey, r) })
}

// awaitRecovery waits until the fault's probe transfer is terminal, read
// from the transfers database, and records the time since the fault.
func (s *suite) awaitRecovery(f *fault, within time.Duration) {
	s.t.Helper()
	var status string
	var err error
	if !poll.Wait(within, poll.Interval, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = s.transfer.QueryRow(ctx, `SELECT status FROM transferencia WHERE id = $1`, f.probeKey).Scan(&status)
		return err == nil && status != "PENDENTE"
	}) {
		s.errorf("%s: the probe transfer %s was not terminal within %s (status %q, err %v)", f.name, f.probeKey, within, status, err)
		f.recovery = -1
		return
	}
	f.recovery = time.Since(f.at)
}

func (s *suite) begin(name string, want ...string) *fault {
	f := &fault{name: name, at: time.Now(), want: want, transfersDown: slices.Contains(want, "ServiceDown{transfers}")}
	s.faults = append(s.faults, f)
	s.probe(f)
	s.t.Logf("fault: %s", name)
	return f
}

// killRestart kills processes with SIGKILL, keeps them down for
// flagDown, then starts them again.
func (s *suite) killRestart(names ...string) {
	s.t.Helper()
	var want []string
	for _, n := range names {
		want = append(want, "ServiceDown{"+s.procs[n].job+"}")
	}
	f := s.begin("kill -9 "+strings.Join(names, " + "), want...)
	f.hitsNotifications = strings.Contains(strings.Join(names, " "), "notifications")
	for _, n := range names {
		s.procs[n].kill9()
	}
	s.settle(*flagDown)
	for _, n := range names {
		s.procs[n].start(s.t)
	}
	f.restored = time.Now()
	s.awaitRecovery(f, time.Minute)
}

// takeover measures the relay takeover of transfers. With the logical
// relay it is logicalTakeover. With the polling relay, it kills
// transfers-a at a moment its relay holds leases and
// measures how long until the rows it had leased are published by its
// sibling: from the kill (the database clock) to the last published_at of
// those rows published after the kill (the others were finished by
// transfers-a itself just before it died). A kill that left no row to take
// over measures nothing and is tried again, up to five times.
func (s *suite) takeover() (time.Duration, int) {
	s.t.Helper()
	if *flagRelay == "logical" {
		return s.logicalTakeover()
	}
	for attempt := 1; attempt <= 5; attempt++ {
		took, rows := s.takeoverOnce(attempt)
		if rows > 0 || took < 0 {
			return took, rows
		}
	}
	s.errorf("takeover: five kills of transfers-a left no leased row to take over")
	return -1, 0
}

func (s *suite) takeoverOnce(attempt int) (time.Duration, int) {
	s.t.Helper()
	const leased = `
SELECT e.id FROM outbox_event e
 WHERE e.status = 'PROCESSING'
   AND e.lease_owner::oid IN (
       SELECT l.objid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
          AND l.classid = hashtext('outbox_relay')::oid AND a.application_name = 'transfers-a'
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`
	var ids []uuid.UUID
	deadline := time.Now().Add(30 * time.Second)
	for len(ids) == 0 {
		if time.Now().After(deadline) {
			s.errorf("takeover: transfers-a held no lease within 30s of watching")
			return -1, 0
		}
		rows, err := s.transfer.Query(context.Background(), leased)
		if err != nil {
			s.t.Fatalf("takeover: leased rows: %v", err)
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			s.t.Fatalf("takeover: leased rows: %v", err)
		}
	}
	f := s.begin(fmt.Sprintf("kill -9 transfers-a holding leases (takeover, try %d)", attempt), "ServiceDown{transfers}")
	var killedAt time.Time
	if err := s.transfer.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&killedAt); err != nil {
		s.t.Fatal(err)
	}
	s.procs["transfers-a"].kill9()
	var last *time.Time
	var after, pending int
	if !poll.Wait(time.Minute, 10*time.Millisecond, func() bool {
		err := s.transfer.QueryRow(context.Background(), `
SELECT count(*) FILTER (WHERE status <> 'PUBLISHED'),
       count(*) FILTER (WHERE status = 'PUBLISHED' AND published_at >= $2),
       max(published_at) FILTER (WHERE published_at >= $2)
  FROM outbox_event WHERE id = ANY($1)`, ids, killedAt).Scan(&pending, &after, &last)
		if err != nil {
			s.t.Fatal(err)
		}
		return pending == 0
	}) {
		s.errorf("takeover: %d of the %d rows transfers-a had leased still unpublished after 1m", pending, len(ids))
		return -1, len(ids)
	}
	var took time.Duration
	if last != nil {
		took = last.Sub(killedAt)
		f.note = fmt.Sprintf("%d of its %d leased rows published by transfers-b %s after the kill", after, len(ids), took.Round(time.Millisecond))
	} else {
		f.note = fmt.Sprintf("all %d leased rows were published by transfers-a before it died: nothing to take over", len(ids))
	}
	s.settle(*flagDown)
	s.procs["transfers-a"].start(s.t)
	f.restored = time.Now()
	s.awaitRecovery(f, time.Minute)
	return took, after
}

type takeoverResult struct {
	took time.Duration
	rows int
}

// brokerResult is the broker restart's figure.
type brokerResult struct {
	recovery time.Duration // from the restarted broker answering to the first transfer settled after
}

// runFaults injects the faults in sequence, traffic running.
func (s *suite) runFaults() map[string]any {
	s.t.Helper()
	out := map[string]any{}
	gap := func() { s.settle(5 * time.Second) }

	took, rows := s.takeover()
	out["takeover"] = takeoverResult{took, rows}
	gap()
	for _, n := range []string{"ledger", "antifraud", "notifications"} {
		s.killRestart(n)
		gap()
	}
	s.killRestart("transfers-b", "ledger")
	gap()

	// The broker: kill -9, down for flagDown, restart on its storage.
	f := s.begin("kill -9 Kafka broker", "OutboxBrokerUnreachable{transfers}")
	s.kafka.Kill(1)
	s.settle(*flagDown)
	s.kafka.Start(1)
	ready := time.Now()
	f.restored = ready
	var first time.Time
	if !poll.Wait(time.Minute, poll.Interval, func() bool {
		var t *time.Time
		err := s.transfer.QueryRow(context.Background(),
			`SELECT min(atualizada_em) FROM transferencia WHERE status = 'LIQUIDADA' AND atualizada_em >= $1`, ready).Scan(&t)
		if err == nil && t != nil {
			first = *t
		}
		return !first.IsZero()
	}) {
		s.errorf("broker restart: no transfer settled within 1m of the broker being ready")
	}
	if !first.IsZero() {
		out["broker"] = brokerResult{first.Sub(ready)}
		f.note = fmt.Sprintf("first transfer settled %s after the broker was ready", first.Sub(ready).Round(time.Millisecond))
	}
	s.awaitRecovery(f, time.Minute)
	gap()

	// PostgreSQL crash-restart of the cluster of ledger, antifraud and
	// notifications.
	f = s.begin("pg_ctl restart -m immediate (ledger, antifraud, notifications)", "ConsumerWaitingForDependency{antifraud}")
	f.hitsNotifications, f.noSnapshots = true, true
	s.pgA.RestartImmediate()
	f.restored = time.Now()
	s.awaitRecovery(f, time.Minute)
	gap()

	// The transfers database stopped for flagDBStop.
	f = s.begin(fmt.Sprintf("transfers database stopped %s", *flagDBStop), "ConsumerWaitingForDependency{transfers}")
	f.transfersDown, f.noReads = true, true
	s.pgB.StopImmediate()
	// Results that reach the projection while its database is down wait for
	// it (their partitions hold, nothing is dead-lettered), whatever was in
	// flight at the stop: a few exact copies of settled results arrive now.
	dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
	s.produce(s.copies(dctx, s.topics.Settled, 4)...)
	dcancel()
	s.settle(*flagDBStop)
	s.pgB.Start()
	f.restored = time.Now()
	s.awaitRecovery(f, 2*time.Minute)
	gap()

	// Poison records and exact duplicates of valid records.
	f = s.begin("poison records + exact duplicates on every topic",
		"ConsumerDLTRecords{antifraud,"+s.topics.Requested+"}",
		"ConsumerDLTRecords{ledger,"+s.topics.Analysed+"}",
		"ConsumerDLTRecords{transfers,"+s.topics.Settled+"}",
		"ConsumerDLTRecords{notifications,"+s.topics.Settled+"}")
	out["poison"] = s.injectPoison()
	out["duplicates"] = s.injectDuplicates()
	f.restored = time.Now()
	return out // the caller stops the load, then awaits this fault's recovery
}

// poisonMarker is in the value of every poison record, so the DLT check
// can tell them from anything else.
const poisonMarker = "chaos-poison"

// injectPoison writes poison records: not JSON and missing fields on each
// main topic, and a record due a year ahead on each notification retry
// topic. It returns how many records each DLT must hold: one per poison
// record and group that consumes its topic.
func (s *suite) injectPoison() map[string]int {
	s.t.Helper()
	consumers := map[string]int{ // groups per main topic
		s.topics.Requested: 1, // antifraud
		s.topics.Analysed:  1, // ledger
		s.topics.Settled:   2, // transfers' projection, notifications
		s.topics.Rejected:  2,
	}
	want := map[string]int{}
	var msgs []kafka.Message
	for _, topic := range []string{s.topics.Requested, s.topics.Analysed, s.topics.Settled, s.topics.Rejected} {
		id := uuid.NewString()
		msgs = append(msgs,
			kafka.Message{Topic: topic, Key: []byte("CH-BRL-00"), Value: []byte("{not json " + poisonMarker + " " + id),
				Headers: []kafka.Header{{Key: events.HeaderEventID, Value: []byte(id)}}},
		)
		id = uuid.NewString()
		msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte("CH-BRL-00"),
			Value: []byte(`{"eventoId":"` + id + `","marca":"` + poisonMarker + `"}`),
			Headers: []kafka.Header{{Key: events.HeaderEventID, Value: []byte(id)},
				{Key: events.HeaderEventType, Value: []byte(eventType(s.topics, topic))}}})
		want[events.DLT(topic)] += 2 * consumers[topic]
	}
	for _, main := range []string{s.topics.Settled, s.topics.Rejected} {
		id := uuid.New()
		payload, _ := json.Marshal(map[string]any{"eventoId": id, "transferenciaId": uuid.New(), "marca": poisonMarker,
			"motivo": events.ReasonInsufficientFunds, "ocorridoEm": time.Now().UTC()})
		due := big.NewInt(time.Now().Add(365 * 24 * time.Hour).UnixMilli()).Bytes()
		msgs = append(msgs, kafka.Message{Topic: broker.RetryTopic(main, broker.RetryDelays[0]), Key: []byte("CH-BRL-00"), Value: payload,
			Headers: []kafka.Header{{Key: events.HeaderEventID, Value: []byte(id.String())},
				{Key: events.HeaderEventType, Value: []byte(eventType(s.topics, main))},
				{Key: "retry_topic-backoff-timestamp", Value: due}}})
		want[events.DLT(main)]++
	}
	s.produce(msgs...)
	return want
}

// suiteTopics are the suite's topics (broker.SuiteTopics) at replication
// factor rf and, where that list lacks them, those of holds: the four
// topics, their DLTs, and the notification retry topics of reservada and
// cancelada.
func (s *suite) suiteTopics(rf int) []broker.TopicSpec {
	specs := broker.SuiteTopics(s.topics, rf)
	have := map[string]bool{}
	for _, sp := range specs {
		have[sp.Name] = true
	}
	var names []string
	for _, t := range s.topics.Holds() {
		names = append(names, t, events.DLT(t))
	}
	for _, main := range []string{s.topics.Reserved, s.topics.Cancelled} {
		for _, d := range broker.RetryDelays {
			names = append(names, broker.RetryTopic(main, d))
		}
	}
	for _, n := range names {
		if !have[n] {
			have[n] = true
			specs = append(specs, broker.TopicSpec{Name: n, Partitions: specs[0].Partitions, ReplicationFactor: rf, Retention: specs[0].Retention})
		}
	}
	return specs
}

// samePartition writes each record to the partition it names, so that a
// copy lands beside its original.
type samePartition struct{}

func (samePartition) Balance(m kafka.Message, partitions ...int) int { return m.Partition }

func eventType(t events.Topics, topic string) string {
	switch topic {
	case t.Requested:
		return events.TypeRequested
	case t.Analysed:
		return events.TypeAnalysed
	case t.Settled:
		return events.TypeSettled
	default:
		return events.TypeRejected
	}
}

// injectDuplicates writes exact copies (key, value, headers) of up to 20
// valid records of every main and retry topic (and, with holds in the
// mix, of the four hold topics). It returns the copies per
// topic.
func (s *suite) injectDuplicates() map[string]int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topics := append([]string{s.topics.Requested, s.topics.Analysed, s.topics.Settled, s.topics.Rejected}, s.mixTopics()...)
	for _, main := range []string{s.topics.Settled, s.topics.Rejected} {
		for _, d := range broker.RetryDelays {
			topics = append(topics, broker.RetryTopic(main, d))
		}
	}
	out := map[string]int{}
	var copies []kafka.Message
	for _, topic := range topics {
		c := s.copies(ctx, topic, 20)
		copies = append(copies, c...)
		out[topic] = len(c)
	}
	s.produce(copies...)
	return out
}

// copies returns exact copies of up to n valid records of topic.
func (s *suite) copies(ctx context.Context, topic string, n int) []kafka.Message {
	s.t.Helper()
	msgs, err := readTopic(ctx, s.kc, s.kafka.Addr(1), topic)
	if err != nil {
		s.t.Fatalf("read %s: %v", topic, err)
	}
	var out []kafka.Message
	for _, m := range msgs {
		if len(out) == n {
			break
		}
		if !strings.Contains(string(m.Value), poisonMarker) {
			out = append(out, kafka.Message{Topic: topic, Partition: m.Partition, Key: m.Key, Value: m.Value, Headers: m.Headers})
		}
	}
	return out
}

func (s *suite) produce(msgs ...kafka.Message) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.writer.WriteMessages(ctx, msgs...); err != nil {
		s.t.Fatalf("produce: %v", err)
	}
}

// ------------------------------------------------------------------ checks

// check waits until every accepted transfer is terminal (within
// flagTerminal of the last fault) and checks the outcome by SQL and by
// reading Kafka, then prints the table.
func (s *suite) check(lastFault time.Time, results map[string]any) {
	t := s.t
	t.Helper()
	ctx := context.Background()
	requests, accepted, refused := s.load.snapshot()
	// The probes went through the load (as their own client): they are among accepted.
	keys := make([]uuid.UUID, 0, len(accepted))
	for k := range accepted {
		keys = append(keys, uuid.MustParse(k))
	}

	// Every accepted transfer has a row and a terminal status.
	var rows, pending int
	if !poll.Wait(time.Until(lastFault.Add(*flagTerminal)), 100*time.Millisecond, func() bool {
		err := s.transfer.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'PENDENTE') FROM transferencia WHERE id = ANY($1)`,
			keys).Scan(&rows, &pending)
		if err != nil {
			t.Fatal(err)
		}
		return pending == 0 && rows == len(keys)
	}) {
		s.errorf("%s after the last fault: %d of %d accepted transfers have a row, %d still PENDENTE",
			time.Since(lastFault).Round(time.Second), rows, len(keys), pending)
	}
	terminalAfter := time.Since(lastFault)
	lost := len(keys) - rows

	var total, settled, rejected, released int
	if err := s.transfer.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'LIQUIDADA'),
		count(*) FILTER (WHERE status = 'REJEITADA'), count(*) FILTER (WHERE status IN ('CANCELADA', 'EXPIRADA'))
		FROM transferencia`).Scan(&total, &settled, &rejected, &released); err != nil {
		t.Fatal(err)
	}
	// A row whose key the client never got a 202 for is fine (the answer
	// was lost, the client was still retrying when the load stopped);
	// a row whose key was never sent is not.
	var stray int
	allKeys := make([]uuid.UUID, 0, len(requests))
	for k := range requests {
		allKeys = append(allKeys, uuid.MustParse(k))
	}
	if err := s.transfer.QueryRow(ctx, `SELECT count(*) FROM transferencia WHERE NOT (id = ANY($1))`, allKeys).Scan(&stray); err != nil {
		t.Fatal(err)
	}
	if stray != 0 {
		s.errorf("%d transfers whose key the client never sent", stray)
	}
	if len(refused) > 0 {
		s.errorf("%d submissions refused with a 4xx, e.g. %v", len(refused), first(refused))
	}

	// The stores' invariants, shared with TestChaosCluster.
	stores := s.checkStores(ctx, s.errorf)

	// Notifications: one log row per result event (by its key), at most
	// one delivery per event id at the receiver, one per terminal transfer,
	// one more per hold the ledger reserved (its reservada) and one per
	// refund the ledger decided.
	wantHooks := settled + rejected + released + stores.reservations + stores.refunds
	var notifRows, notifTransfers int
	if err := s.notify.QueryRow(ctx, `SELECT count(*), count(DISTINCT transfer_id) FROM notification`).Scan(&notifRows, &notifTransfers); err != nil {
		t.Fatal(err)
	}
	delivered, dupDeliveries, badHooks := s.recv.counts()
	// Wait (bounded) for the notifications to catch up with the terminal
	// transfers, then compare.
	poll.Wait(30*time.Second, 200*time.Millisecond, func() bool {
		delivered, dupDeliveries, _ = s.recv.counts()
		return delivered >= wantHooks
	}) // a shortfall is reported below
	if notifTransfers+stores.reservations+stores.refunds != notifRows {
		s.errorf("notifications: %d log rows for %d transfers, %d reservations and %d refunds", notifRows, notifTransfers, stores.reservations,
			stores.refunds)
	}
	// Webhooks are delivered at least once: a crash of notifications (or
	// of its database) between a delivery and its record sends it again,
	// with the same event id for the receiver to drop. Any other duplicate
	// is a bug.
	var unexplained []string
	s.recv.mu.Lock()
	for _, at := range s.recv.dups {
		explained := false
		for _, f := range s.faults {
			if f.hitsNotifications && !f.at.Before(at.Add(-time.Second)) && f.at.Before(at.Add(15*time.Second)) {
				explained = true
			}
		}
		if !explained {
			unexplained = append(unexplained, at.Format(time.RFC3339Nano))
		}
	}
	s.recv.mu.Unlock()
	if len(unexplained) > 0 {
		s.errorf("webhooks: %d duplicate deliveries not preceded by a crash of notifications or its database (first deliveries at %v)",
			len(unexplained), unexplained)
	}
	if len(badHooks) > 0 {
		s.errorf("webhooks failing verification: %v", badHooks)
	}
	if delivered != wantHooks {
		s.errorf("webhooks: %d events delivered for %d terminal transfers, %d reservations and %d refunds", delivered, settled+rejected+released,
			stores.reservations, stores.refunds)
	}

	// DLTs hold exactly the poison.
	wantDLT := results["poison"].(map[string]int)
	var gotDLT, foreign map[string]int
	var lagTotal int64
	var lagDetail []string
	poll.Wait(30*time.Second, time.Second, func() bool {
		gotDLT, foreign = map[string]int{}, map[string]int{}
		// The hold topics' DLTs get no poison: any record in them is foreign.
		for _, main := range append([]string{s.topics.Requested, s.topics.Analysed, s.topics.Settled, s.topics.Rejected}, s.mixTopics()...) {
			dlt := events.DLT(main)
			msgs, err := readTopic(ctx, s.kc, s.kafka.Addr(1), dlt)
			if err != nil {
				t.Fatalf("read %s: %v", dlt, err)
			}
			for _, m := range msgs {
				if strings.Contains(string(m.Value), poisonMarker) {
					gotDLT[dlt]++
				} else {
					foreign[dlt]++
				}
			}
		}
		lagTotal, lagDetail = 0, nil
		for group, topics := range s.groups() {
			n, d, err := groupLag(ctx, s.kc, group, topics)
			if err != nil {
				t.Fatalf("lag of %s: %v", group, err)
			}
			lagTotal += n
			lagDetail = append(lagDetail, d...)
		}
		return equalCounts(gotDLT, wantDLT) && len(foreign) == 0 && lagTotal == 0
	}) // what is still wrong at the deadline is reported below
	if !equalCounts(gotDLT, wantDLT) || len(foreign) > 0 {
		s.errorf("DLTs: poison records %v, want %v; other records %v", gotDLT, wantDLT, foreign)
	}
	if lagTotal != 0 {
		sort.Strings(lagDetail)
		s.errorf("consumer lag %d:\n  %s", lagTotal, strings.Join(lagDetail, "\n  "))
	}

	// Alerts: each fault fired its alert.
	s.checkAlerts(ctx)

	// The figures.
	st := &s.load.stats
	takeover := results["takeover"].(takeoverResult)
	var brokerRec time.Duration = -1
	if b, ok := results["broker"].(brokerResult); ok {
		brokerRec = b.recovery
	}
	var dltGot, dltWant int
	for _, n := range gotDLT {
		dltGot += n
	}
	for _, n := range wantDLT {
		dltWant += n
	}
	dups := 0
	for _, n := range results["duplicates"].(map[string]int) {
		dups += n
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("transfers sent (keys)", len(requests))
	row("accepted (202)", len(accepted))
	row("settled", settled)
	row("rejected", rejected)
	row("holds reserved / cancelled or expired", fmt.Sprintf("%d / %d", stores.reservations, released))
	row("lost (202 without a row)", lost)
	row(fmt.Sprintf("not terminal %s after the last fault", *flagTerminal), pending)
	row("doubled (more than one posting pair)", stores.doubled)
	row("POSTs / 503 (without Retry-After) / 409 / conn errors / other 5xx", fmt.Sprintf("%d / %d (%d) / %d / %d / %d",
		st.posts.Load(), st.unavailable503.Load(), st.noRetryAfter.Load(), st.conflict409.Load(), st.connErrors.Load(), st.status5xx.Load()))
	row("DLT records / injected poison", fmt.Sprintf("%d / %d %v", dltGot, dltWant, gotDLT))
	row("exact duplicates injected", dups)
	row("DEAD outbox rows", stores.dead)
	row("unresolved held results", stores.held)
	row("webhook duplicates (same event id) / unexplained by a crash", fmt.Sprintf("%d / %d", dupDeliveries, len(unexplained)))
	row("consumer lag (all groups)", lagTotal)
	row("all terminal after last fault", terminalAfter.Round(time.Millisecond))
	if *flagRelay == "logical" {
		row("logical relay takeover (kill -9 of the streaming instance -> next event published)",
			fmt.Sprintf("%s (%d events; max %s)", takeover.took.Round(time.Millisecond), takeover.rows, takeoverMax()))
	} else {
		row("relay takeover (kill -9 -> leased rows published)", fmt.Sprintf("%s (%d rows; max %s)", takeover.took.Round(time.Millisecond), takeover.rows, takeoverMax()))
	}
	row("broker ready -> first settled", fmt.Sprintf("%s (max %s)", brokerRec.Round(time.Millisecond), *flagBrokerRec))
	_ = tw.Flush()
	b.WriteString("\nfault\tdown\trecovered in\talerts fired\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, f := range s.faults {
		down := "-"
		if !f.restored.IsZero() {
			down = f.restored.Sub(f.at).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.name, down, f.recovery.Round(time.Millisecond), strings.Join(f.fired, " "))
		if f.note != "" {
			fmt.Fprintf(tw, "  %s\t\t\t\n", f.note)
		}
	}
	_ = tw.Flush()
	t.Logf("chaos figures:\n%s", b.String())

	if lost > 0 {
		s.errorf("%d accepted transfers lost (no row)", lost)
	}
	if st.status5xx.Load() > 0 {
		s.errorf("%d answers 5xx other than 503", st.status5xx.Load())
	}
	if st.noRetryAfter.Load() > 0 {
		s.errorf("%d answers 503 without Retry-After", st.noRetryAfter.Load())
	}
	if takeover.took < 0 || takeover.took > takeoverMax() {
		s.errorf("relay takeover took %s, want at most %s", takeover.took, takeoverMax())
	}
	if brokerRec < 0 || brokerRec > *flagBrokerRec {
		s.errorf("flow resumed %s after the broker was ready, want at most %s", brokerRec, *flagBrokerRec)
	}

	// The injections that need the holds released, after the checks above
	// (which they would break) and before the history is completed.
	s.injectAfterLoad()

	// The history, judged as a whole: the checks above count, the checker
	// reads every operation in order.
	s.checkHistory(ctx, requests, s.snapsTaken, s.snapsFailed)
}

// groups are the consumer groups of the suite and the topics each reads.
func (s *suite) groups() map[string][]string {
	t := s.topics
	out := map[string][]string{
		"transferencias-projecao": {t.Settled, t.Rejected},
		"antifraude":              {t.Requested},
		"ledger":                  {t.Analysed},
		"ledger-dlt-monitor":      {events.DLT(t.Analysed)},
		"notificacoes":            {t.Settled, t.Rejected},
	}
	results := []string{t.Settled, t.Rejected}
	if *flagHolds > 0 {
		// The projection and notifications read the ledger's hold results
		// in their own groups; the ledger reads the commands in
		// ledgerCommandGroup.
		out["transferencias-projecao"] = append(out["transferencias-projecao"], t.Reserved, t.Cancelled)
		out["notificacoes"] = append(out["notificacoes"], t.Reserved, t.Cancelled)
		out[ledgerCommandGroup] = append(out[ledgerCommandGroup], t.CaptureRequested, t.CancelRequested)
		out["ledger-dlt-monitor"] = append(out["ledger-dlt-monitor"], events.DLT(t.CaptureRequested), events.DLT(t.CancelRequested))
		results = append(results, t.Reserved, t.Cancelled)
	}
	if *flagRefunds > 0 {
		// The projection and notifications read the refunds' results; the
		// ledger reads estorno.solicitado in ledgerRefundGroup.
		out["transferencias-projecao"] = append(out["transferencias-projecao"], t.RefundSettled, t.RefundRejected)
		out["notificacoes"] = append(out["notificacoes"], t.RefundSettled, t.RefundRejected)
		out[ledgerRefundGroup] = append(out[ledgerRefundGroup], t.RefundRequested)
		out["ledger-dlt-monitor"] = append(out["ledger-dlt-monitor"], events.DLT(t.RefundRequested))
		results = append(results, t.RefundSettled, t.RefundRejected)
	}
	for _, d := range broker.RetryDelays {
		g := "notificacoes-retry-" + strconv.FormatInt(d.Milliseconds(), 10)
		for _, main := range results {
			out[g] = append(out[g], broker.RetryTopic(main, d))
		}
	}
	return out
}

// mixTopics are the topics of holds and of refunds the load's mix uses.
func (s *suite) mixTopics() []string { return append(s.holdTopics(), s.refundTopics()...) }

// holdTopics are the four topics of holds when the load has holds in its
// mix, none otherwise.
func (s *suite) holdTopics() []string {
	if *flagHolds <= 0 {
		return nil
	}
	return s.topics.Holds()
}

// ledgerCommandGroup is the ledger's consumer group of the capture and
// cancellation commands (the ledger's DefaultCommandsGroup).
const ledgerCommandGroup = "ledger-comandos"

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func first(m map[string]string) string {
	for k, v := range m {
		return k + ": " + v
	}
	return ""
}
