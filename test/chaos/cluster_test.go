//go:build chaos

package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/chaos/history"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/poll"
	"github.com/paysuite/payments/test/support/repo"
)

var (
	flagReplication = flag.String("chaos.replication", string(cluster.Sync),
		"TestChaosCluster: the PostgreSQL pairs' replication, sync or async (async cuts the standby's replication before each crash and must find the loss)")
	flagReduced = flag.Bool("chaos.cluster-reduced", false,
		"TestChaosCluster's CI form: one leader kill, two brokers down, a hung broker, and one failover, one hung primary and one stopped standby over the two pairs")
	flagHang      = flag.Duration("chaos.hang", 30*time.Second, "TestChaosCluster: how long a broker or a primary stays stopped (SIGSTOP)")
	flagSettleMax = flag.Duration("chaos.settle-pause-max", 2*time.Minute,
		"TestChaosCluster: the longest accepted pause of settlements around a fault (a generous bound; the figures show the real ones)")
)

// probeTopic is a scratch topic (RF 3, min ISR 2) the test writes to
// itself, to see whether the cluster takes an acks=all write.
const probeTopic = "chaos-cluster-probe"

// pgPair is one of the two PostgreSQL pairs and what runs on it.
type pgPair struct {
	name string
	p    *cluster.Pair
	dbs  []string // its databases, for the history's unfenced window
	// notifications: the webhook sender's database is on it, so its
	// faults may explain a webhook delivered twice.
	notifications bool
}

// dsn is the URL of database db for the test's own pools: on the pairs'
// multi-host URLs in TestChaosCluster, on the single servers otherwise.
func (s *suite) dsn(db, app string) string {
	switch {
	case s.pairB != nil && db == "transfers":
		return s.pairB.URL(db, app)
	case s.pairA != nil:
		return s.pairA.URL(db, app)
	case db == "transfers":
		return s.pgB.DSN(db, app)
	default:
		return s.pgA.DSN(db, app)
	}
}

// TestChaosCluster runs the failover scenarios under the open-loop load: a
// three-node KRaft cluster (RF 3, min ISR 2) and two PostgreSQL pairs
// (transfers on one, ledger, antifraud and notifications on the other),
// the services reaching them through the pairs' multi-host URLs and all
// three brokers. With -chaos.replication=sync every scenario runs and the
// history checker must find no anomaly; with async the standby's
// replication is cut before each primary's crash and the checker must
// find the lost commits.
func TestChaosCluster(t *testing.T) {
	mode := cluster.Mode(*flagReplication)
	if mode != cluster.Sync && mode != cluster.Async {
		t.Fatalf("-chaos.replication=%s: want sync or async", mode)
	}
	pairOpts := relayPairOpts(t)
	began := time.Now()
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

	var wg sync.WaitGroup
	var buildErr error
	wg.Go(func() { buildErr = buildBinaries(root, binDir) })
	s := &suite{t: t, topics: events.DefaultTopics, procs: map[string]*proc{}}
	s.openHistory(logDir)
	s.pairA = cluster.StartPair(t, "", mode, pairOpts...)
	s.pairB = cluster.StartPair(t, "", mode, pairOpts...)
	s.kafka = cluster.StartKafka(t, "", 3)
	wg.Wait()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	brokers := s.kafka.Brokers()
	t.Logf("infrastructure up in %s: Kafka %v (3 KRaft nodes up in %s), PostgreSQL pairs (%s) %s/%s (ledger, antifraud, notifications) and %s/%s (transfers)",
		time.Since(began).Round(time.Millisecond), brokers, s.kafka.Started.Round(time.Millisecond), mode,
		s.pairA.Primary().Addr(), s.pairA.Standby().Addr(), s.pairB.Primary().Addr(), s.pairB.Standby().Addr())

	s.createClusterTopics(brokers)
	for _, db := range []string{"ledger", "antifraud", "notifications"} {
		s.pairA.CreateDB(db)
	}
	s.pairB.CreateDB("transfers")
	s.kc = &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second}

	iss := authtest.New(t)
	s.bearer = iss.Bearer(t, "chaos-client", authtest.AllScopes...)
	s.minter = iss.Bearer(t, "chaos-tesouraria", authtest.DepositScopes...)
	s.prober = iss.Bearer(t, probeClient, authtest.AllScopes...)
	s.recv = newReceiver(t, s.rec)
	s.startClusterServices(binDir, logDir, iss.Env(), strings.Join(brokers, ","))
	s.startProm(root)
	s.transfer = s.pool(s.dsn("transfers", "chaos-test"))
	s.ledger = s.pool(s.dsn("ledger", "chaos-test"))
	s.notify = s.pool(s.dsn("notifications", "chaos-test"))
	t.Logf("suite up in %s (5 processes)", time.Since(began).Round(time.Millisecond))

	pick := s.accounts()
	s.load = newLoad([]string{s.procs["transfers-a"].url(), s.procs["transfers-b"].url()}, s.bearer, s.rec)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	loadDone, readDone, snapsDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loadDone)
		s.load.run(ctx, stop, *flagRate, pick)
	}()
	go func() {
		defer close(readDone)
		s.load.read(ctx, stop, *flagReads)
	}()
	go func() {
		defer close(snapsDone)
		s.snapsTaken, s.snapsFailed = s.snapshots(ctx, stop)
	}()
	loadStart := time.Now()

	s.settle(10 * time.Second) // traffic before the first fault
	pairs := []*pgPair{{name: "transfers", p: s.pairB, dbs: []string{"transfers"}},
		{name: "ledger+antifraud+notifications", p: s.pairA, dbs: []string{"ledger", "antifraud", "notifications"}, notifications: true}}
	if mode == cluster.Async {
		for _, pr := range pairs {
			s.failover(pr, true)
			s.settle(5 * time.Second)
		}
	} else {
		s.clusterFaults(pairs)
	}
	// Traffic after the last fault, so that its minute's figures have
	// transfers to measure.
	s.settle(20 * time.Second)
	close(stop)
	<-loadDone
	<-readDone
	<-snapsDone
	s.load.wait()
	lastFault := s.faults[len(s.faults)-1].restored
	t.Logf("load stopped after %s; every submission answered", time.Since(loadStart).Round(time.Second))

	requests, accepted, _ := s.load.snapshot()
	s.awaitTerminal(accepted, lastFault, mode == cluster.Sync)
	s.awaitHolds(mode == cluster.Sync)
	s.awaitLag(3 * time.Minute)
	report := s.errorf // the asynchronous run's lost commits break the stores' invariants: logged
	if mode == cluster.Async {
		report = t.Logf
	}
	s.checkStores(ctx, report)
	s.checkAlerts(ctx)
	rep, h, err := s.judgeHistory(ctx, requests, s.snapsTaken, s.snapsFailed)
	s.printClusterFigures(h, len(requests), len(accepted))
	if mode == cluster.Sync {
		if err != nil {
			s.errorf("history: %v", err)
		}
		if !rep.OK() {
			s.errorf("history: %d anomalies with synchronous replication (see the table above)", len(rep.Anomalies))
		}
	} else {
		s.expectLoss(rep)
	}
	t.Logf("chaos cluster test (%s) took %s", mode, time.Since(began).Round(time.Second))
	s.recap()
}

// createClusterTopics creates the suite's topics at RF 3 (min ISR 2,
// unclean election off) and the probe topic.
func (s *suite) createClusterTopics(brokers []string) {
	s.t.Helper()
	specs := s.suiteTopics(3)
	for i := range specs {
		specs[i].Partitions = topicPartitions
	}
	specs = append(specs, broker.TopicSpec{Name: probeTopic, Partitions: 1, ReplicationFactor: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, broker.Config{Brokers: brokers}, specs); err != nil {
		s.t.Fatalf("create topics: %v", err)
	}
}

// startClusterServices starts the four services (transfers twice) on the
// pairs' multi-host URLs and every broker.
func (s *suite) startClusterServices(binDir, logDir string, authEnv map[string]string, brokers string) {
	t := s.t
	t.Helper()
	add := func(name, job, dsn string, extra map[string]string) {
		p := &proc{name: name, job: job, bin: filepath.Join(binDir, job), port: freePort(t), log: filepath.Join(logDir, name+".log")}
		m := map[string]string{
			"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "TMPDIR": os.TempDir(),
			"HTTP_ADDR":            "127.0.0.1:" + strconv.Itoa(p.port),
			"DATABASE_URL":         dsn,
			"DATABASE_MAX_CONNS":   "10",
			"KAFKA_BROKERS":        brokers,
			"LOG_FORMAT":           "json",
			"LOG_LEVEL":            "info",
			"OUTBOX_POLL_INTERVAL": "100ms",
			"OUTBOX_RELAY":         *flagRelay,
		}
		for _, kv := range []map[string]string{authEnv, extra} {
			for k, v := range kv {
				m[k] = v
			}
		}
		for k, v := range m {
			p.env = append(p.env, k+"="+v)
		}
		s.procs[name] = p
		t.Cleanup(p.kill9)
	}
	add("transfers-a", "transfers", s.dsn("transfers", "transfers-a"), nil)
	add("transfers-b", "transfers", s.dsn("transfers", "transfers-b"), nil)
	add("ledger", "ledger", s.dsn("ledger", "ledger"), nil)
	add("antifraud", "antifraud", s.dsn("antifraud", "antifraud"), map[string]string{
		"ANTIFRAUD_VELOCITY_MAX_COUNT": "0", "ANTIFRAUD_VELOCITY_MAX_CENTS": "0",
	})
	add("notifications", "notifications", s.dsn("notifications", "notifications"), map[string]string{
		"NOTIFY_CHANNEL":      "webhook",
		"WEBHOOK_DEFAULT_URL": s.recv.srv.URL + "/webhooks/paysuite",
		"WEBHOOK_SECRET":      webhookSecret,
		"WEBHOOK_TIMEOUT":     "5s",
		"WEBHOOK_ALLOW_HTTP":  "true",
	})
	// transfers-a first: it migrates the shared database alone.
	s.procs["transfers-a"].start(t)
	var startWG sync.WaitGroup
	errs := make(chan error, 4)
	for _, n := range []string{"transfers-b", "ledger", "antifraud", "notifications"} {
		startWG.Go(func() {
			if err := s.procs[n].startErr(); err != nil {
				errs <- err
			}
		})
	}
	startWG.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// clusterFaults runs the synchronous run's scenarios in sequence, traffic
// running: the Kafka ones, then each pair's (a stopped synchronous
// standby, a kill -9 of the primary, a hung primary), the pair rebuilt to
// a synchronous standby after each failover. The reduced form keeps one
// of each kind.
func (s *suite) clusterFaults(pairs []*pgPair) {
	gap := func() { s.settle(5 * time.Second) }
	topics := []string{s.topics.Requested, s.topics.Analysed, s.topics.Settled, s.topics.Rejected}
	if *flagReduced {
		topics = topics[:1]
	}
	for _, topic := range topics {
		s.killLeader(topic)
		gap()
	}
	if !*flagReduced {
		s.killController()
		gap()
	}
	s.killTwoBrokers()
	gap()
	s.hangBroker(s.topics.Settled)
	gap()
	if *flagReduced {
		// One of each PostgreSQL fault: the stopped standby and the kill
		// on the transfers pair (POST is what they hurt), the hung primary
		// on the other.
		s.standbyStopped(pairs[0])
		gap()
		s.failover(pairs[0], false)
		gap()
		s.hangPrimary(pairs[1])
		return
	}
	for _, pr := range pairs {
		s.standbyStopped(pr)
		gap()
		s.failover(pr, false)
		gap()
		s.hangPrimary(pr)
		gap()
	}
}

// busiestPartition is topic's partition with the most records (offsets
// asks again while a leader is still moving).
func (s *suite) busiestPartition(topic string) int {
	s.t.Helper()
	first, end, err := offsets(context.Background(), s.kc, topic)
	if err != nil {
		s.t.Fatalf("offsets of %s: %v", topic, err)
	}
	best, most := 0, int64(-1)
	for p, e := range end {
		if n := e - first[p]; n > most || (n == most && p < best) {
			best, most = p, n
		}
	}
	return best
}

// leaderOf is the leader of topic's busiest partition, and the partition.
func (s *suite) leaderOf(topic string) (node, partition int) {
	s.t.Helper()
	partition = s.busiestPartition(topic)
	var err error
	if !poll.Wait(time.Minute, poll.Interval, func() bool {
		node, err = s.kafka.Leader(topic, partition)
		return err == nil
	}) {
		s.t.Fatalf("leader of %s/%d: %v", topic, partition, err)
	}
	return node, partition
}

// killLeader kills the leader of topic's busiest partition with SIGKILL,
// keeps it down for flagDown and starts it again.
func (s *suite) killLeader(topic string) {
	s.t.Helper()
	node, p := s.leaderOf(topic)
	f := s.begin(fmt.Sprintf("kill -9 Kafka node %d, leader of %s/%d", node, topic, p))
	s.kafka.Kill(node)
	s.settle(*flagDown)
	s.leaderMoved(f, topic, p, node)
	s.kafka.Start(node)
	f.restored = time.Now()
	s.awaitRecovery(f, 2*time.Minute)
}

// killController kills the active controller with SIGKILL and restarts it.
func (s *suite) killController() {
	s.t.Helper()
	var node int
	var err error
	if !poll.Wait(time.Minute, poll.Interval, func() bool {
		node, err = s.kafka.Controller()
		return err == nil
	}) {
		s.t.Fatalf("active controller: %v", err)
	}
	f := s.begin(fmt.Sprintf("kill -9 Kafka node %d, the active controller", node))
	s.kafka.Kill(node)
	var next int
	poll.Wait(time.Minute, poll.Interval, func() bool {
		next, err = s.kafka.Controller()
		return err == nil && next != node
	})
	f.note = fmt.Sprintf("new active controller: node %d (%s after the kill)", next, time.Since(f.at).Round(time.Millisecond))
	s.settle(*flagDown)
	s.kafka.Start(node)
	f.restored = time.Now()
	s.awaitRecovery(f, 2*time.Minute)
}

// killTwoBrokers kills two nodes one after the other; with one replica
// left the cluster must take no acks=all write (an attempt on the probe
// topic must fail), whatever POST answers meanwhile (it writes the
// outbox, not Kafka). Then both start again.
func (s *suite) killTwoBrokers() {
	s.t.Helper()
	a, _ := s.leaderOf(s.topics.Requested)
	b := a%3 + 1
	f := s.begin(fmt.Sprintf("kill -9 Kafka nodes %d then %d (one replica left)", a, b), "OutboxBrokerUnreachable{transfers}")
	s.kafka.Kill(a)
	s.settle(2 * time.Second)
	s.kafka.Kill(b)
	s.settle(3 * time.Second)
	left := 6 - a - b
	w := &kafka.Writer{Addr: kafka.TCP(s.kafka.Addr(left)), Topic: probeTopic, RequiredAcks: kafka.RequireAll,
		MaxAttempts: 3, WriteBackoffMax: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := w.WriteMessages(ctx, kafka.Message{Key: []byte("probe"), Value: []byte("one replica left")})
	cancel()
	_ = w.Close()
	if err == nil {
		s.errorf("%s: the cluster acknowledged an acks=all write with one replica left", f.name)
		f.note = "acks=all write with one replica left: ACKNOWLEDGED"
	} else {
		f.note = fmt.Sprintf("acks=all write with one replica left: refused (%v)", firstLine(err.Error()))
	}
	s.settle(*flagDown)
	s.kafka.Start(a)
	s.kafka.Start(b)
	f.restored = time.Now()
	s.awaitRecovery(f, 3*time.Minute)
}

// hangBroker stops the leader of topic's busiest partition with SIGSTOP
// for flagHang, then resumes it.
func (s *suite) hangBroker(topic string) {
	s.t.Helper()
	node, p := s.leaderOf(topic)
	// The hung node leads partitions of every topic: the relays' sends to
	// it time out. (A killed node's leaderships move within seconds,
	// which the services absorb: leaderMoved is that fault's check.)
	f := s.begin(fmt.Sprintf("SIGSTOP Kafka node %d, leader of %s/%d, for %s", node, topic, p, *flagHang), "OutboxBrokerUnreachable{transfers}")
	s.kafka.Stop(node)
	s.settle(*flagHang)
	s.kafka.Cont(node)
	s.kafka.WaitReady()
	f.restored = time.Now()
	s.awaitRecovery(f, 2*time.Minute)
}

// standbyStopped stops the pair's synchronous standby for 3 × flagDown:
// the primary's commits wait, the services answer 503 (POST must not
// leave the client without an answer) and resume once it is back.
func (s *suite) standbyStopped(pr *pgPair) {
	s.t.Helper()
	f := s.begin("synchronous standby of the " + pr.name + " pair stopped")
	f.hitsNotifications = pr.notifications
	s.onPair(f, pr, false)
	pr.p.StopStandby()
	stopSampling := make(chan struct{})
	backends := peakBackends(pr.p, stopSampling)
	s.settle(3 * *flagDown)
	pr.p.StartStandby()
	pr.p.WaitStreaming()
	close(stopSampling)
	f.note = <-backends
	f.restored = time.Now()
	s.awaitRecovery(f, 2*time.Minute)
}

// failover kills the pair's primary with SIGKILL, promotes the standby
// and fences the old primary (killed, back as a standby: it never comes
// back as a primary). cut: the standby's replication is cut 3 s before
// the crash (the asynchronous run: what the primary acknowledged since is
// lost). In the synchronous run the pair is then rebuilt (Resync) to a
// synchronous standby. The killed primary never runs again before
// FenceOld restarts it as a standby: unlike hangPrimary, no unfenced
// window.
func (s *suite) failover(pr *pgPair, cut bool) {
	s.t.Helper()
	name := "kill -9 primary of the " + pr.name + " pair, standby promoted"
	if cut {
		pr.p.CutReplication()
		s.settle(3 * time.Second)
		name += " (replication cut 3 s before)"
	}
	// The probe goes in after the promotion: with replication cut one
	// sent now would be lost with the primary.
	if pr.p == s.pairB {
		s.awaitInFlight(name)
	}
	f := &fault{name: name, at: time.Now(), hitsNotifications: pr.notifications}
	s.onPair(f, pr, true)
	s.faults = append(s.faults, f)
	s.t.Logf("fault: %s", name)
	old := pr.p.Primary()
	pr.p.KillPrimary()
	took := pr.p.Promote()
	pr.p.FenceOld()
	f.restored = time.Now()
	f.note = fmt.Sprintf("pg_ctl promote took %s; old primary fenced as a standby", took.Round(time.Millisecond))
	s.primaryChanged(f, pr, old)
	s.probe(f)
	s.awaitRecovery(f, 2*time.Minute)
	if !cut {
		pr.p.Resync()
	}
}

// hangPrimary stops the pair's primary with SIGSTOP for flagHang,
// promotes the standby meanwhile, resumes the old primary and shows what
// fencing prevents (it believes it is the primary, and a fresh connection
// on the multi-host URL lands on it), then fences it. The pair is then
// rebuilt to a synchronous standby. From SIGCONT until the fencing
// returns the old primary runs unfenced on purpose: the services' pools
// may hold a connection to it (one whose statement had no deadline waits
// through the hang and is handed out again once it answers) or open one
// that lands on it, and read there what it lacks. The history records
// that window (KindUnfenced), which explains a stale read answered in it.
func (s *suite) hangPrimary(pr *pgPair) {
	s.t.Helper()
	name := fmt.Sprintf("SIGSTOP primary of the %s pair for %s, standby promoted, SIGCONT, fenced", pr.name, *flagHang)
	if pr.p == s.pairB {
		s.awaitInFlight(name)
	}
	f := s.begin(name)
	f.hitsNotifications = pr.notifications
	s.onPair(f, pr, true)
	old := pr.p.Primary()
	pr.p.StopPrimary()
	s.settle(2 * time.Second)
	took := pr.p.Promote()
	s.settle(*flagHang - 2*time.Second - took)
	resumed := time.Now()
	pr.p.ContOld()
	believes, lands := unfencedOld(old, pr.p.URL("postgres", "chaos-fence-check"))
	pr.p.FenceOld()
	s.rec.Unfenced(resumed, time.Now(), history.Unfenced{Fault: name, Databases: pr.dbs})
	_, landsAfter := unfencedOld(old, pr.p.URL("postgres", "chaos-fence-check"))
	f.restored = time.Now()
	f.note = fmt.Sprintf("promoted in %s; revived unfenced: believes it is the primary %v, a fresh multi-host connection lands on it %v; fenced: lands on it %v",
		took.Round(time.Millisecond), believes, lands, landsAfter)
	if landsAfter {
		s.errorf("%s: after fencing a fresh connection still lands on the old primary", f.name)
	}
	s.primaryChanged(f, pr, old)
	s.awaitRecovery(f, 2*time.Minute)
	pr.p.Resync()
}

// unfencedOld reports whether server old takes itself for a primary
// (pg_is_in_recovery false) and whether a fresh connection on the
// multi-host URL lands on it.
func unfencedOld(old *cluster.PG, url string) (believesPrimary, landsOnIt bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if db, err := postgres.Open(ctx, old.DSN("postgres", "chaos-fence-check"), 1); err == nil {
		var inRecovery bool
		believesPrimary = db.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery) == nil && !inRecovery
		db.Close()
	}
	if db, err := postgres.Open(ctx, url, 1); err == nil {
		var port int
		landsOnIt = db.QueryRow(ctx, `SELECT inet_server_port()`).Scan(&port) == nil && port == old.Port()
		db.Close()
	}
	return believesPrimary, landsOnIt
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// awaitTerminal waits until every accepted transfer has a terminal row
// (within flagTerminal of the last fault); must: a shortfall fails the
// test (the synchronous run), otherwise it is only logged (the
// asynchronous run loses some for good, which the checker reports).
func (s *suite) awaitTerminal(accepted map[string]time.Time, lastFault time.Time, must bool) {
	s.t.Helper()
	keys := make([]string, 0, len(accepted))
	for k := range accepted {
		keys = append(keys, k)
	}
	var done int
	ok := poll.Wait(time.Until(lastFault.Add(*flagTerminal))+10*time.Second, 200*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := s.transfer.QueryRow(ctx, `SELECT count(*) FROM transferencia WHERE id::text = ANY($1) AND status <> 'PENDENTE'`,
			keys).Scan(&done)
		return err == nil && done == len(keys)
	})
	switch {
	case !ok && must:
		s.errorf("%d of %d accepted transfers terminal %s after the last fault", done, len(keys), time.Since(lastFault).Round(time.Second))
	case !ok:
		s.t.Logf("%d of %d accepted transfers terminal %s after the last fault", done, len(keys), time.Since(lastFault).Round(time.Second))
	}
}

// lossKinds are the anomalies an asynchronous failover's lost commits
// show: a transfer answered 202 that is then 404 or stays PENDENTE, a
// settlement whose postings vanished, and their consequences (a retry
// answered from the new primary, postings of a transfer the transfers
// database no longer has, records whose outbox rows are gone); with
// refunds, a refund answered 202 that is then 404 or never ends, and the
// refunds a database that lost one no longer counts (a refund accepted,
// or settled, beside one it forgot).
var lossKinds = map[string]bool{
	history.NotTerminal: true, history.StaleRead: true, history.LostPosting: true, history.TwoTerminal: true,
	history.Idempotency: true, history.StrayPosting: true, history.LostRecord: true, history.DuplicateWebhook: true,
	history.RefundStatus: true, history.OverRefund: true,
}

// expectLoss asserts the asynchronous run's report: the checker found the
// lost commits (some anomaly of the kinds a loss shows, at least one of
// not-terminal, stale-read, lost-posting) and nothing a loss does not
// explain (the bank's sums, negative balances, order).
func (s *suite) expectLoss(rep history.Report) {
	s.t.Helper()
	core := rep.Count(history.NotTerminal) + rep.Count(history.StaleRead) + rep.Count(history.LostPosting)
	if core == 0 {
		s.errorf("asynchronous failover with replication cut: the checker found no lost commit (%d anomalies); the loss scenario did not happen or the checker missed it",
			len(rep.Anomalies))
	}
	for _, a := range rep.Anomalies {
		if !lossKinds[a.Kind] {
			s.errorf("asynchronous failover: anomaly %s, which lost commits do not explain", a)
		}
	}
	s.t.Logf("asynchronous failover: the checker found %d anomalies (%d not-terminal, %d stale-read, %d lost-posting), as expected",
		len(rep.Anomalies), rep.Count(history.NotTerminal), rep.Count(history.StaleRead), rep.Count(history.LostPosting))
}

// awaitLag waits (up to within) until every consumer group has consumed
// every record of its topics, so that the checker's consumed records are
// the groups' whole work, not a snapshot of a backlog: a group still
// behind then is reported, and its records show as lost-record.
func (s *suite) awaitLag(within time.Duration) {
	s.t.Helper()
	var total int64
	var detail []string
	if !poll.Wait(within, time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		total, detail = 0, nil
		for group, topics := range s.groups() {
			n, d, err := groupLag(ctx, s.kc, group, topics)
			if err != nil {
				detail = append(detail, err.Error())
				return false
			}
			total += n
			detail = append(detail, d...)
		}
		return total == 0
	}) {
		s.errorf("consumer lag %d %s after the load stopped:\n  %s", total, within, strings.Join(detail, "\n  "))
	}
}
