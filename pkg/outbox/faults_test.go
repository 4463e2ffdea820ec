package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/outbox/outboxtest"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// sendLog records every record a fake broker was asked to send, and
// answers with a function of the record.
type sendLog struct {
	mu    sync.Mutex
	sent  map[string]int // event id -> sends acked
	order []string       // event ids in the order they were acked
	// delay holds each call; it honours the call's context.
	delay time.Duration
	// fail returns the error for one record, nil to ack it.
	fail func(m broker.Record) error
	// failCall, when set, says whether fail applies to this call at all.
	failCall func(msgs []broker.Record) bool
}

func newSendLog() *sendLog { return &sendLog{sent: map[string]int{}} }

func (p *sendLog) Publish(ctx context.Context, msgs ...broker.Record) error {
	if p.delay > 0 {
		select {
		case <-time.After(p.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make(broker.PublishErrors, len(msgs))
	failed := false
	applies := p.failCall == nil || p.failCall(msgs)
	for i, m := range msgs {
		if p.fail != nil && applies {
			errs[i] = p.fail(m)
		}
		if errs[i] != nil {
			failed = true
			continue
		}
		id := header(m, events.HeaderEventID)
		p.sent[id]++
		p.order = append(p.order, id)
	}
	if failed {
		return errs
	}
	return nil
}

func (p *sendLog) sends(id uuid.UUID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[id.String()]
}

func (p *sendLog) snapshot() (map[string]int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.sent))
	for k, v := range p.sent {
		m[k] = v
	}
	return m, append([]string(nil), p.order...)
}

// gatePublisher holds every call until the test opens its gate, ignoring
// the call's context (a broker call stuck beyond its timeout), then answers
// with err.
type gatePublisher struct {
	mu    sync.Mutex
	calls int
	gates []chan error
}

func (p *gatePublisher) Publish(_ context.Context, msgs ...broker.Record) error {
	p.mu.Lock()
	p.calls++
	g := make(chan error, 1)
	p.gates = append(p.gates, g)
	p.mu.Unlock()
	return <-g
}

// open answers call n (from 0) with err, once it has been made.
func (p *gatePublisher) open(t *testing.T, n int, err error) {
	t.Helper()
	poll.Until(t, 10*time.Second, "publish call "+strconv.Itoa(n), func() (bool, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.gates) > n, ""
	})
	p.mu.Lock()
	p.gates[n] <- err
	p.mu.Unlock()
}

// startRelay runs r until the returned stop is called (or the test ends);
// stop waits for Run to return.
func startRelay(t *testing.T, r *outbox.Relay) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("relay: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("relay did not stop within 30s of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// A relay whose process dies (here: its database session is terminated,
// which is what PostgreSQL sees when a process dies) has its leased rows
// taken over by another relay within a second, long before its 30 s lease
// ends; while it was alive, the other relay left them alone. The dead
// relay's late outcome then touches nothing.
func TestRelayTakeoverWithinASecondOfOwnerDeath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	var items []payload
	for i := range 20 {
		items = append(items, payload{Key: "k" + strconv.Itoa(i%4), N: i})
	}
	ids := e.enqueue(t, items...)

	stuck := &gatePublisher{}
	cfgA := fastRelay("doomed")
	cfgA.Lease, cfgA.SendTimeout = 30*time.Second, 20*time.Second
	stopA := startRelay(t, outbox.NewRelay(e.ob, stuck, cfgA, testLogger(t), nil))
	poll.True(t, 10*time.Second, "relay A leases every event", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PROCESSING' AND locked_by LIKE 'doomed/%' AND lease_owner IS NOT NULL`) == len(ids)
	})

	survivor := newSendLog()
	cfgB := fastRelay("survivor")
	cfgB.PollInterval = 0 // the production default
	startRelay(t, outbox.NewRelay(e.ob, survivor, cfgB, testLogger(t), nil))
	// Relay A is alive (stuck in its send): B leaves its leases alone.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE locked_by LIKE 'doomed/%'`); n != len(ids) {
			t.Fatalf("%d of %d events left relay A while it was alive", len(ids)-n, len(ids))
		}
		time.Sleep(100 * time.Millisecond) // sampling an invariant over a period, not waiting for a condition
	}

	// A's process "dies": its session goes.
	killed := time.Now()
	if n := count(t, e.db, `
		SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l
		 WHERE l.locktype = 'advisory' AND l.classid = hashtext('outbox_relay')::oid AND l.objsubid = 2
		   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		   AND l.objid IN (SELECT DISTINCT lease_owner::oid FROM outbox_event WHERE status = 'PROCESSING')`); n != 1 {
		t.Fatalf("terminated %d liveness sessions, want relay A's one", n)
	}
	poll.True(t, 10*time.Second, "survivor publishes A's events", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED'`) == len(ids)
	})
	if took := time.Since(killed); took > time.Second {
		t.Errorf("takeover took %v after the owner's session died, want under 1s", took)
	} else {
		t.Logf("takeover took %v", took)
	}
	// A's stuck send finally fails; its marks must not touch B's rows.
	stuck.open(t, 0, broker.RecordError(kerr.NotEnoughReplicas))
	stopA()
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED' AND attempts = 0`); n != len(ids) {
		t.Errorf("%d of %d events published and untouched after A's late outcome", n, len(ids))
	}
	sent, order := survivor.snapshot()
	for _, id := range ids {
		if sent[id.String()] != 1 {
			t.Errorf("event %s sent %d times by the survivor, want 1", id, sent[id.String()])
		}
	}
	// Per-key order held through the takeover.
	want := map[string][]string{}
	for i, it := range items {
		want[it.Key] = append(want[it.Key], ids[i].String())
	}
	keyOf := map[string]string{}
	for i, it := range items {
		keyOf[ids[i].String()] = it.Key
	}
	got := map[string][]string{}
	for _, id := range order {
		got[keyOf[id]] = append(got[keyOf[id]], id)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per-key order (-want +got):\n%s", diff)
	}
}

// A relay that is alive but slow (every broker call takes 1.5 s) keeps its
// leases: another relay polling all along never sends its events; and a
// batch of isolated events, one slow call each, stops sending before the
// lease ends instead of outliving it, giving back what it did not send.
// Every event is sent exactly once.
func TestRelaySlowButAliveKeepsItsLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	var items []payload
	for i := range 8 {
		items = append(items, payload{Key: "iso-" + strconv.Itoa(i), N: i})
	}
	for i := range 8 {
		items = append(items, payload{Key: "plain-" + strconv.Itoa(i), N: i})
	}
	ids := e.enqueue(t, items...)
	// The isolated ones go one call each: 8 x 1.5 s, far beyond a 4 s lease.
	if _, err := e.db.Exec(context.Background(), `UPDATE outbox_event SET isolate = true WHERE key LIKE 'iso-%'`); err != nil {
		t.Fatal(err)
	}
	log := newSendLog()
	slow := &delayed{next: log, delay: 1500 * time.Millisecond}
	cfgA := fastRelay("slow")
	cfgA.Workers = 1
	cfgA.Lease, cfgA.SendTimeout = 4*time.Second, 2*time.Second
	startRelay(t, outbox.NewRelay(e.ob, slow, cfgA, testLogger(t), nil))
	poll.True(t, 10*time.Second, "the slow relay leases every event", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE locked_by LIKE 'slow/%'`) == len(ids)
	})
	cfgB := fastRelay("fast")
	startRelay(t, outbox.NewRelay(e.ob, log, cfgB, testLogger(t), nil))
	poll.True(t, 60*time.Second, "every event published", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED'`) == len(ids)
	})
	sent, _ := log.snapshot()
	for i, id := range ids {
		if sent[id.String()] != 1 {
			t.Errorf("event %s (key %s) sent %d times, want 1", id, items[i].Key, sent[id.String()])
		}
	}
}

// delayed holds each call for delay (honouring its context), then forwards.
type delayed struct {
	next  broker.Publisher
	delay time.Duration
}

func (d *delayed) Publish(ctx context.Context, msgs ...broker.Record) error {
	select {
	case <-time.After(d.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return d.next.Publish(ctx, msgs...)
}

// Each claim has its own lease, even within one relay: a claim whose lease
// ran out while its send was stuck, and whose rows the relay's next claim
// took again, records its late failure without resetting the rows the next
// claim holds.
func TestRelayClaimsNeverTouchEachOthersRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ids := e.enqueue(t, payload{"a", 1}, payload{"a", 2}, payload{"b", 3})
	gate := &gatePublisher{}
	cfg := fastRelay("twins")
	cfg.Lease, cfg.SendTimeout = 3*time.Second, time.Second
	r := outbox.NewRelay(e.ob, gate, cfg, testLogger(t), nil)
	publish := func() <-chan error {
		done := make(chan error, 1)
		go func() { _, err := r.PublishBatch(context.Background()); done <- err }()
		return done
	}
	first := publish()
	poll.True(t, 10*time.Second, "the first claim's lease runs out", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE locked_by = 'twins/1' AND locked_until < now()`) == len(ids)
	})
	second := publish()
	poll.True(t, 10*time.Second, "the second claim leases the rows", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE locked_by = 'twins/2'`) == len(ids)
	})
	gate.open(t, 0, broker.RecordError(kerr.NotEnoughReplicas)) // the stale claim fails late
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE locked_by = 'twins/2' AND status = 'PROCESSING' AND attempts = 0`); n != len(ids) {
		t.Fatalf("the stale claim reset %d of the next claim's rows", len(ids)-n)
	}
	gate.open(t, 1, nil)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED'`); n != len(ids) {
		t.Fatalf("%d of %d published by the second claim", n, len(ids))
	}
}

// An isolated event (refused by the broker before) is not sent when an
// older event of its key failed in the same batch: it would overtake it.
// It goes back to the queue untouched, and follows once the older one is
// through.
func TestRelayIsolatedEventWaitsForItsKeysFailedOlderEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ids := e.enqueue(t, payload{"k", 1}, payload{"k", 2})
	if _, err := e.db.Exec(context.Background(), `UPDATE outbox_event SET isolate = true WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	log := newSendLog()
	var healed sync.Map
	log.fail = func(m broker.Record) error {
		if _, ok := healed.Load("yes"); !ok && header(m, events.HeaderEventID) == ids[0].String() {
			return broker.RecordError(kerr.NotEnoughReplicas)
		}
		return nil
	}
	cfg := fastRelay("iso")
	cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, time.Millisecond
	r := outbox.NewRelay(e.ob, log, cfg, testLogger(t), nil)
	n, err := r.PublishBatch(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("PublishBatch = %d, %v; want both events claimed", n, err)
	}
	if got := log.sends(ids[1]); got != 0 {
		t.Fatalf("the isolated event was sent %d times after its key's older event failed", got)
	}
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE id = $1 AND status = 'PENDING' AND attempts = 0 AND locked_by IS NULL`, ids[1]); n != 1 {
		t.Fatalf("the held-back event is not back in the queue untouched")
	}
	healed.Store("yes", true)
	poll.Until(t, 10*time.Second, "both published", func() (bool, string) {
		if _, err := r.PublishBatch(context.Background()); err != nil {
			t.Fatal(err)
		}
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED'`) == 2, ""
	})
	_, order := log.snapshot()
	if diff := cmp.Diff([]string{ids[0].String(), ids[1].String()}, order); diff != "" {
		t.Errorf("send order (-want +got):\n%s", diff)
	}
}

// Only the broker's refusal of the record counts toward DEAD; every other
// failure is retried without limit, counted by cause.
func TestRelayOnlyRefusalsCountTowardDead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      error
		cause    string
		wantDead bool
	}{
		{"message too large", broker.RecordError(kerr.MessageTooLarge), broker.CauseRecordRefused, true},
		{"corrupt message", broker.RecordError(kerr.CorruptMessage), broker.CauseRecordRefused, true},
		{"invalid record", broker.RecordError(kerr.InvalidRecord), broker.CauseRecordRefused, true},
		{"topic authorization", broker.RecordError(kerr.TopicAuthorizationFailed), broker.CauseAuthorization, false},
		{"unknown server error", broker.RecordError(kerr.UnknownServerError), broker.CauseUnknownServer, false},
		{"unknown topic", broker.RecordError(kerr.UnknownTopicOrPartition), broker.CauseUnknownTopic, false},
		{"not enough replicas", broker.RecordError(kerr.NotEnoughReplicas), broker.CauseBroker, false},
		{"network", &netErr{}, broker.CauseNetwork, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newDBEnv(t)
			db, ob := e.db, e.ob
			ids := e.enqueue(t, payload{"k", 1})
			log := newSendLog()
			log.fail = func(broker.Record) error { return tt.err }
			cfg := fastRelay("kinds")
			cfg.MaxAttempts = 3
			cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, time.Millisecond
			reg := prometheus.NewRegistry()
			m := outbox.NewMetrics(reg)
			r := outbox.NewRelay(ob, log, cfg, testLogger(t), m)
			rounds := 0
			poll.Until(t, 20*time.Second, "six failed sends or DEAD", func() (bool, string) {
				n, err := r.PublishBatch(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				rounds += n
				return rounds >= 6 || count(t, db, `SELECT count(*) FROM outbox_event WHERE status = 'DEAD'`) == 1, ""
			})
			var status string
			var attempts, refusals int
			if err := db.QueryRow(context.Background(), `SELECT status, attempts, refusals FROM outbox_event WHERE id = $1`, ids[0]).
				Scan(&status, &attempts, &refusals); err != nil {
				t.Fatal(err)
			}
			type row struct {
				Status             string
				Attempts, Refusals int
			}
			want := row{"PENDING", 6, 0}
			if tt.wantDead {
				want = row{"DEAD", 3, 3}
			}
			if diff := cmp.Diff(want, row{status, attempts, refusals}); diff != "" {
				t.Errorf("outbox row (-want +got):\n%s", diff)
			}
			var got dto.Metric
			if err := m.SendFailures.WithLabelValues(tt.cause).Write(&got); err != nil {
				t.Fatal(err)
			}
			if got.GetCounter().GetValue() != float64(want.Attempts) {
				t.Errorf("outbox_send_failures_total{cause=%q} = %v, want %d", tt.cause, got.GetCounter().GetValue(), want.Attempts)
			}
		})
	}
}

type netErr struct{}

func (*netErr) Error() string   { return "dial tcp: connection refused" }
func (*netErr) Timeout() bool   { return false }
func (*netErr) Temporary() bool { return false }

// A DEAD event holds its key back: the key's later events wait until an
// operator requeues it (it then goes first) or discards it (the later ones
// go on). Both actions are audited; other keys never wait.
func TestRelayDeadEventHoldsItsKeyUntilAnOperatorActs(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"requeue", "discard"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 1)
			ids := e.enqueue(t, payload{"k", 1}, payload{"k", 2}, payload{"other", 3})
			if _, err := e.db.Exec(context.Background(), `
				UPDATE outbox_event SET status = 'DEAD', refusals = 12, attempts = 12, isolate = true WHERE id = $1`, ids[0]); err != nil {
				t.Fatal(err)
			}
			log := newSendLog()
			r := outbox.NewRelay(e.ob, log, fastRelay("held"), testLogger(t), nil)
			if n, err := r.PublishBatch(context.Background()); err != nil || n != 1 {
				t.Fatalf("PublishBatch = %d, %v; want only the other key's event", n, err)
			}
			if log.sends(ids[1]) != 0 || log.sends(ids[2]) != 1 {
				t.Fatalf("sends: held %d (want 0), other key %d (want 1)", log.sends(ids[1]), log.sends(ids[2]))
			}
			audit := outbox.Audit{Operator: "alice", Reason: "TICKET-1"}
			if err := e.ob.Discard(context.Background(), ids[0], outbox.Audit{}); !errors.Is(err, outbox.ErrNoOperator) {
				t.Fatalf("Discard without operator = %v, want ErrNoOperator", err)
			}
			wantOrder := []string{ids[2].String(), ids[1].String()}
			if action == "requeue" {
				n, err := e.ob.Requeue(context.Background(), outbox.RequeueFilter{ID: ids[0]}, audit)
				if err != nil || n != 1 {
					t.Fatalf("Requeue = %d, %v", n, err)
				}
				wantOrder = []string{ids[2].String(), ids[0].String(), ids[1].String()}
			} else {
				if err := e.ob.Discard(context.Background(), ids[0], audit); err != nil {
					t.Fatal(err)
				}
				if err := e.ob.Discard(context.Background(), ids[0], audit); !errors.Is(err, outbox.ErrNotDead) {
					t.Fatalf("second Discard = %v, want ErrNotDead", err)
				}
			}
			poll.Until(t, 10*time.Second, "the key's events sent", func() (bool, string) {
				if _, err := r.PublishBatch(context.Background()); err != nil {
					t.Fatal(err)
				}
				_, order := log.snapshot()
				return len(order) == len(wantOrder), ""
			})
			_, order := log.snapshot()
			if diff := cmp.Diff(wantOrder, order); diff != "" {
				t.Errorf("send order (-want +got):\n%s", diff)
			}
			entries := outboxtest.AuditLog(t, e.db, 10)
			if len(entries) != 1 || entries[0].At.IsZero() {
				t.Fatalf("audit log = %+v, want one entry", entries)
			}
			entries[0].At = time.Time{}
			wantEntry := outboxtest.AuditEntry{Operator: "alice", Action: action, EventID: ids[0], Topic: e.topic, Key: "k", Reason: "TICKET-1"}
			if diff := cmp.Diff(wantEntry, entries[0]); diff != "" {
				t.Errorf("audit entry (-want +got):\n%s", diff)
			}
		})
	}
}

// A configuration under which a relay could send past its lease, or would
// gather longer than its fallback poll, is refused.
func TestRelayConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     outbox.RelayConfig
		wantErr bool
	}{
		{"defaults", outbox.RelayConfig{}, false},
		{"lease equal to send timeout", outbox.RelayConfig{Lease: 15 * time.Second, SendTimeout: 15 * time.Second}, true},
		{"lease below send timeout", outbox.RelayConfig{Lease: 10 * time.Second}, true},
		{"lease with room", outbox.RelayConfig{Lease: 5 * time.Second, SendTimeout: 3 * time.Second}, false},
		{"backoff base above max", outbox.RelayConfig{BackoffBase: time.Minute, BackoffMax: time.Second}, true},
		{"gather below the poll interval", outbox.RelayConfig{Gather: 30 * time.Millisecond}, false},
		{"gather as long as the poll interval", outbox.RelayConfig{Gather: 500 * time.Millisecond}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
	db := openDB(t)
	r := outbox.NewRelay(outbox.New(db), newSendLog(), outbox.RelayConfig{Lease: time.Second}, testLogger(t), nil)
	if err := r.Run(context.Background()); err == nil {
		t.Errorf("Run with a lease shorter than the send timeout returned nil")
	}
}

// An outage is waited out, and the flow resumes once the broker is back,
// not when each event's backoff runs out: events whose sends failed because
// the broker could not be reached are due again at the first send the broker
// takes (the relay probes it with the oldest of them), whether the relay
// that saw them fail is still running or a new one starts. A failure that is
// not an outage (a missing ACL) keeps its backoff.
func TestRelayResumesWhenTheBrokerIsBackNotAfterTheBackoff(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("relay restarted %v", restart), func(t *testing.T) {
			t.Parallel()
			e := newDBEnv(t)
			db, ob := e.db, e.ob
			var down atomic.Bool
			down.Store(true)
			unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
			log := newSendLog()
			log.fail = func(m broker.Record) error {
				switch {
				case string(m.Key) == "acl":
					return broker.RecordError(kerr.TopicAuthorizationFailed)
				case down.Load():
					return unreachable
				}
				return nil
			}
			cfg := fastRelay("outage")
			cfg.BackoffBase, cfg.BackoffMax = time.Minute, time.Minute // a failed event waits 30 to 60 s
			stop := startRelay(t, outbox.NewRelay(ob, log, cfg, testLogger(t), nil))

			var items []payload
			for i := range 30 {
				items = append(items, payload{Key: "acct-" + strconv.Itoa(i%5), N: i})
			}
			ids := e.enqueue(t, items...)
			acl := e.enqueue(t, payload{"acl", 0})[0]
			poll.Until(t, 20*time.Second, "every key's events failed for want of the broker, and the ACL one", func() (bool, string) {
				n := count(t, db, `SELECT count(DISTINCT key) FROM outbox_event
					WHERE waits_for_broker AND next_attempt_at > now() + interval '20 seconds'`)
				a := count(t, db, `SELECT count(*) FROM outbox_event WHERE id = $1 AND attempts > 0`, acl)
				return n == 5 && a == 1, fmt.Sprintf("%d keys waiting for the broker, ACL attempted %d", n, a)
			})
			if restart {
				stop()
			}
			down.Store(false)
			if restart {
				startRelay(t, outbox.NewRelay(ob, log, cfg, testLogger(t), nil))
			}
			poll.Until(t, 10*time.Second, "every event sent after the broker came back", func() (bool, string) {
				sent := 0
				for _, id := range ids {
					sent += min(log.sends(id), 1)
				}
				return sent == len(ids), fmt.Sprintf("%d of %d sent", sent, len(ids))
			})
			var waits, later bool
			if err := db.QueryRow(context.Background(), `SELECT waits_for_broker, next_attempt_at > now() + interval '20 seconds'
				FROM outbox_event WHERE id = $1`, acl).Scan(&waits, &later); err != nil {
				t.Fatal(err)
			}
			if waits || !later {
				t.Errorf("the event refused for a missing ACL: waits for the broker %v, still in its backoff %v; want false, true", waits, later)
			}
		})
	}
}

// A relay whose database refuses writes as a standby does (SQLSTATE 25006:
// its pool reached a standby, or an old primary fenced read-only) sends
// nothing and changes no event: no attempt counted, nothing dead. Once its
// pool reaches a server that takes writes (the promoted standby), every
// event is sent.
func TestRelayWaitsWhileItsDatabaseIsAStandby(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	ids := e.enqueue(t, payload{"a", 1}, payload{"a", 2}, payload{"b", 3})

	pool, promote := pgtest.StandbyPool(t, e.db.Config())
	log := newSendLog()
	startRelay(t, outbox.NewRelay(outbox.New(postgres.Wrap(pool)), log, fastRelay("standby"), testLogger(t), nil))

	poll.Never(t, 2*time.Second, "an event sent or touched while the database is a standby", func() (bool, string) {
		sent := 0
		for _, id := range ids {
			sent += log.sends(id)
		}
		touched := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status <> 'PENDING' OR attempts > 0`)
		return sent > 0 || touched > 0, fmt.Sprintf("%d sends, %d events touched", sent, touched)
	})

	promote()
	poll.Until(t, 20*time.Second, "every event sent after the promotion", func() (bool, string) {
		sent := 0
		for _, id := range ids {
			sent += min(log.sends(id), 1)
		}
		return sent == len(ids), fmt.Sprintf("%d of %d sent", sent, len(ids))
	})
	if n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'DEAD'`); n != 0 {
		t.Errorf("%d events dead after the database was a standby", n)
	}
}
