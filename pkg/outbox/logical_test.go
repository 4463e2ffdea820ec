package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/poll"
)

// logicalConfig is a logical relay config for tests: fast status, settle
// and takeover.
func logicalConfig() outbox.LogicalConfig {
	return outbox.LogicalConfig{StatusInterval: 100 * time.Millisecond, Heartbeat: 200 * time.Millisecond,
		SettleInterval: 200 * time.Millisecond, TakeoverRetry: 100 * time.Millisecond, RefusalAttempts: 2}
}

// dropSlotOnCleanup drops the test database's logical slot when the test
// ends: a database with a slot cannot be dropped. Registered before the
// relay starts, it runs after the relay has stopped.
func dropSlotOnCleanup(t *testing.T, e *env) string {
	t.Helper()
	return dropSlotOf(t, e.db)
}

func dropSlotOf(tb testing.TB, db *postgres.DB) string {
	tb.Helper()
	slot := outbox.SlotFor(db.Config().ConnConfig.Database, "paysuite_outbox")
	tb.Cleanup(func() {
		// The walsender of a stopped relay takes a moment to exit.
		poll.True(tb, 30*time.Second, "the slot dropped", func() bool {
			_, err := db.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
			return err == nil
		})
	})
	return slot
}

func newLogical(t *testing.T, e *env, pub broker.Publisher) *outbox.LogicalRelay {
	return outbox.NewLogicalRelay(e.ob, pub, logicalConfig(), fastRelay("logical"), testLogger(t), nil, nil)
}

// The stream carries every committed event, per key in commit order and,
// within a transaction, in insert order; events committed before the slot
// existed (left by the polling relay) go first, from the table.
func TestLogicalRelayPublishesInCommitOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	dropSlotOnCleanup(t, e)
	// Before the slot: the drain's part.
	var all []string
	for i := range 20 {
		for _, id := range e.enqueue(t, payload{Key: "k" + strconv.Itoa(i%4), N: i}, payload{Key: "k" + strconv.Itoa(i%4), N: i}) {
			all = append(all, id.String())
		}
	}
	r := newLogical(t, e, e.writer)
	background.Go(t, "logical relay", r.Run)
	poll.True(t, 30*time.Second, "the relay streams", func() bool { return r.Active() })
	for i := 20; i < 200; i++ {
		for _, id := range e.enqueue(t, payload{Key: "k" + strconv.Itoa(i%4), N: i}, payload{Key: "k" + strconv.Itoa(i%4), N: i}) {
			all = append(all, id.String())
		}
	}
	got := readTopic(t, e.kcfg, e.topic, len(all), 60*time.Second)
	pos := map[string]int{}
	for i, id := range all {
		pos[id] = i
	}
	last := map[string]int{}
	seen := map[string]bool{}
	for _, m := range got {
		id := header(m, events.HeaderEventID)
		if seen[id] {
			continue // a duplicate is fine: consumers deduplicate
		}
		seen[id] = true
		k := string(m.Key)
		if p, ok := last[k]; ok && pos[id] < p {
			t.Fatalf("key %s: event %d published after event %d", k, pos[id], p)
		}
		last[k] = pos[id]
	}
	for _, id := range all {
		if !seen[id] {
			t.Fatalf("event %s never published", id)
		}
	}
	poll.True(t, 20*time.Second, "rows settled as PUBLISHED", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED'`) == len(all)
	})
}

// outagePublisher fails every call as an unreachable broker would, until
// opened; then it passes to next.
type outagePublisher struct {
	next broker.Publisher
	open chan struct{}
}

func (p *outagePublisher) Publish(ctx context.Context, msgs ...broker.Record) error {
	select {
	case <-p.open:
		return p.next.Publish(ctx, msgs...)
	default:
		return broker.RecordError(kerr.LeaderNotAvailable)
	}
}

// The relay confirms only what the broker acknowledged: while every send
// fails, the slot's confirmed position stays before the unsent events
// (through heartbeats and status reports); a relay that dies then and a new
// one started on the same slot publishes them all.
func TestLogicalRelayConfirmsOnlyAcknowledgedEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	slot := dropSlotOnCleanup(t, e)
	first := newLogical(t, e, &outagePublisher{next: e.writer, open: make(chan struct{})})
	task := background.Go(t, "first relay", first.Run)
	poll.True(t, 30*time.Second, "the relay streams", func() bool { return first.Active() })
	var before string
	if err := e.db.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 10 {
		for _, id := range e.enqueue(t, payload{Key: "k" + strconv.Itoa(i%3), N: i}) {
			ids = append(ids, id.String())
		}
	}
	stuck, _ := pglogrepl.ParseLSN(before)
	// Long enough for many status reports and heartbeats.
	poll.Never(t, 2*time.Second, "the slot confirms past the unsent events", func() (bool, string) {
		var confirmed string
		if err := e.db.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed); err != nil {
			t.Fatal(err)
		}
		c, _ := pglogrepl.ParseLSN(confirmed)
		return c > stuck, fmt.Sprintf("confirmed %s, unsent events after %s", c, stuck)
	})
	task.Stop(t) // the relay dies with its events unsent
	second := newLogical(t, e, e.writer)
	background.Go(t, "second relay", second.Run)
	seen := eventIDs(readTopic(t, e.kcfg, e.topic, len(ids), 60*time.Second))
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("event %s lost across the relay's death", id)
		}
	}
}

// One instance streams; a second waits and takes over within 2 s of the
// first one's connection closing.
func TestLogicalRelayStandbyTakesOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	dropSlotOnCleanup(t, e)
	first := newLogical(t, e, e.writer)
	firstTask := background.Go(t, "first relay", first.Run)
	poll.True(t, 30*time.Second, "the first relay streams", func() bool { return first.Active() })
	second := newLogical(t, e, e.writer)
	background.Go(t, "second relay", second.Run)
	// The second one is refused the slot for as long as the first holds it.
	poll.Never(t, 500*time.Millisecond, "two relays stream one slot", func() (bool, string) { return second.Active(), "" })
	ids := e.enqueue(t, payload{Key: "a", N: 1})
	readTopic(t, e.kcfg, e.topic, 1, 30*time.Second)
	stopped := time.Now()
	firstTask.Stop(t)
	poll.True(t, 5*time.Second, "the second relay streams", func() bool { return second.Active() })
	if took := time.Since(stopped); took > 2*time.Second {
		t.Fatalf("takeover took %v, want under 2s", took)
	}
	ids = append(ids, e.enqueue(t, payload{Key: "a", N: 2})...)
	got := readTopic(t, e.kcfg, e.topic, 2, 30*time.Second)
	if last := header(got[len(got)-1], events.HeaderEventID); last != ids[1].String() {
		t.Fatalf("last record %s, want the event committed after the takeover %s", last, ids[1])
	}
}

// An event the broker refuses turns DEAD after RefusalAttempts; its key's
// later events are held back, across a restart, while other keys flow; a
// requeue sends them, in order.
func TestLogicalRelaySetsRefusedEventsAsideAndHoldsTheirKey(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	dropSlotOnCleanup(t, e)
	var poison string
	sent := newSendLog()
	// A broker fails a partition's record batch whole: the poison event
	// fails the events of its key sent in the same call.
	sent.fail = func(m broker.Record) error {
		if poison != "" && string(m.Key) == "held" {
			return broker.RecordError(kerr.MessageTooLarge)
		}
		return nil
	}
	sent.failCall = func(msgs []broker.Record) bool {
		for _, m := range msgs {
			if header(m, events.HeaderEventID) == poison {
				return true
			}
		}
		return false
	}
	task := background.Go(t, "relay", newLogical(t, e, sent).Run)
	bad := e.enqueue(t, payload{Key: "held", N: 1})
	poison = bad[0].String()
	later := e.enqueue(t, payload{Key: "held", N: 2})
	other := e.enqueue(t, payload{Key: "free", N: 1})
	poll.True(t, 30*time.Second, "the other key's event published", func() bool { return sent.sends(other[0]) > 0 })
	poll.True(t, 10*time.Second, "the refused event DEAD", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'DEAD' AND id = $1`, bad[0]) == 1
	})
	if n := sent.sends(later[0]); n != 0 {
		t.Fatalf("the event behind a DEAD one was sent %d times", n)
	}
	task.Stop(t)
	r := newLogical(t, e, sent)
	background.Go(t, "restarted relay", r.Run)
	more := e.enqueue(t, payload{Key: "held", N: 3})
	free := e.enqueue(t, payload{Key: "free", N: 2})
	poll.True(t, 30*time.Second, "the other key's later event published", func() bool { return sent.sends(free[0]) > 0 })
	if n := sent.sends(later[0]) + sent.sends(more[0]); n != 0 {
		t.Fatalf("events behind a DEAD one sent %d times after a restart", n)
	}
	poison = "" // the broker takes it now
	if _, err := e.ob.Requeue(context.Background(), outbox.RequeueFilter{ID: bad[0]}, outbox.Audit{Operator: "test"}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 30*time.Second, "the key's events published after the requeue", func() bool {
		return sent.sends(bad[0]) > 0 && sent.sends(later[0]) > 0 && sent.sends(more[0]) > 0
	})
	_, order := sent.snapshot()
	at := map[string]int{}
	for i, id := range order {
		if _, ok := at[id]; !ok {
			at[id] = i
		}
	}
	if at[bad[0].String()] >= at[later[0].String()] || at[later[0].String()] >= at[more[0].String()] {
		t.Fatalf("the held key's events went out of order: %v %v %v", at[bad[0].String()], at[later[0].String()], at[more[0].String()])
	}
}

// An idle database's slot does not hold WAL: heartbeats move it while
// other tables are written.
func TestLogicalRelaySlotAdvancesWhenIdle(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	slot := dropSlotOnCleanup(t, e)
	r := newLogical(t, e, newSendLog())
	background.Go(t, "relay", r.Run)
	poll.True(t, 30*time.Second, "the relay streams", func() bool { return r.Active() })
	for i := range 200 {
		if _, err := e.db.Exec(context.Background(), `INSERT INTO widget (id, name)
SELECT gen_random_uuid(), (SELECT string_agg(md5(random()::text || g::text || n::text), '') FROM generate_series(1, 64) g)
  FROM generate_series(1, 50) n`); err != nil {
			t.Fatal(fmt.Errorf("write %d: %w", i, err))
		}
	}
	var written int64
	if err := e.db.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&written); err != nil {
		t.Fatal(err)
	}
	if written < 1<<20 {
		t.Fatalf("the writes produced only %d bytes of WAL behind the slot; the test needs more", written)
	}
	poll.True(t, 10*time.Second, "the slot retains under 64 KiB", func() bool {
		var lag int64
		if err := e.db.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag); err != nil {
			t.Fatal(err)
		}
		return lag < 64<<10
	})
}

// Switching back to the polling relay loses nothing: what the logical relay
// had not settled is sent again (at least once), and the polling service
// sees the slot left behind.
func TestSwitchFromLogicalBackToPollingLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	dropSlotOnCleanup(t, e)
	cfg := logicalConfig()
	cfg.SettleInterval = time.Hour // nothing settled: the polling relay must resend all
	r := outbox.NewLogicalRelay(e.ob, e.writer, cfg, fastRelay("logical"), testLogger(t), nil, nil)
	task := background.Go(t, "logical relay", r.Run)
	var ids []string
	for i := range 30 {
		for _, id := range e.enqueue(t, payload{Key: "k" + strconv.Itoa(i%3), N: i}) {
			ids = append(ids, id.String())
		}
	}
	readTopic(t, e.kcfg, e.topic, len(ids), 60*time.Second)
	task.Stop(t)
	slot, found, err := outbox.LeftBehindSlot(context.Background(), e.db, outbox.LogicalConfig{})
	if err != nil || !found {
		t.Fatalf("LeftBehindSlot = %s, %v, %v; want the logical relay's slot found", slot, found, err)
	}
	runRelay(t, outbox.NewRelay(e.ob, e.writer, fastRelay("polling"), testLogger(t), nil))
	for i := range 10 {
		for _, id := range e.enqueue(t, payload{Key: "k" + strconv.Itoa(i%3), N: 100 + i}) {
			ids = append(ids, id.String())
		}
	}
	poll.True(t, 60*time.Second, "every event PUBLISHED by the polling relay", func() bool {
		return count(t, e.db, `SELECT count(*) FROM outbox_event WHERE status = 'PUBLISHED'`) == len(ids)
	})
}

// A slot that is lost (dropped, or missing on a promoted standby) is found
// and recreated, and what committed meanwhile is published from the table.
func TestLogicalRelayRecreatesALostSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	slot := dropSlotOnCleanup(t, e)
	r := newLogical(t, e, e.writer)
	background.Go(t, "logical relay", r.Run)
	poll.True(t, 30*time.Second, "the relay streams", func() bool { return r.Active() })
	ids := e.enqueue(t, payload{Key: "a", N: 1})
	readTopic(t, e.kcfg, e.topic, 1, 30*time.Second)
	// Lose the slot: end its walsender and drop it before the relay is back.
	poll.True(t, 10*time.Second, "the slot dropped", func() bool {
		_, err := e.db.Exec(context.Background(), `
SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot)
		if err != nil {
			return false
		}
		_, err = e.db.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot)
		return err == nil
	})
	ids = append(ids, e.enqueue(t, payload{Key: "a", N: 2}, payload{Key: "b", N: 1})...)
	readAll(t, e, ids, 60*time.Second)
}

// readAll reads the topic from the start until every id arrived
// (duplicates allowed), or fails at the deadline.
func readAll(t *testing.T, e *env, ids []uuid.UUID, within time.Duration) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id.String()] = true
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: e.kcfg.Brokers, GroupID: kafkatest.Group(t, "all"), Topic: e.topic,
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for len(want) > 0 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("%d events never published (one: %v): %v", len(want), firstKey(want), err)
		}
		delete(want, header(m, events.HeaderEventID))
	}
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// A server that hangs (connections open, nothing answered: a SIGSTOPped
// primary) is told from an idle one: every status asks for a reply, and a
// stream that hears nothing for its silence bound ends and reconnects.
// The events committed meanwhile are published once the server answers
// again (or, in a failover, from the promoted standby). Without the
// replies asked for, the stream would take the silence for idleness and
// stay active on the hung connection.
func TestLogicalRelayLeavesAHungServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	dropSlotOnCleanup(t, e)
	dsn, proxy := netfault.PostgresURL(t, e.db.Config().ConnString())
	pdb, err := postgres.Open(context.Background(), dsn, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pdb.Close)
	r := outbox.NewLogicalRelay(outbox.New(pdb), e.writer, logicalConfig(), fastRelay("logical"), testLogger(t), nil, nil)
	background.Go(t, "logical relay", r.Run)
	poll.True(t, 30*time.Second, "the relay streams", func() bool { return r.Active() })
	before := e.enqueue(t, payload{Key: "k", N: 1})
	readTopic(t, e.kcfg, e.topic, len(before), 30*time.Second)

	proxy.Hang()
	hung := time.Now()
	poll.True(t, 20*time.Second, "the stream ended on the silent server", func() bool { return !r.Active() })
	t.Logf("the stream left the hung server after %v", time.Since(hung).Round(time.Millisecond))
	var during []uuid.UUID
	for i := range 5 {
		during = append(during, e.enqueue(t, payload{Key: "k", N: 10 + i})...)
	}
	proxy.Resume()
	// The slot's confirmed position may not have reached the first event
	// before the hang, so it can be sent again: wait for every id, not
	// for a count of records.
	readAll(t, e, append(before, during...), 60*time.Second)
}
