package admission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/admission"
	"github.com/paysuite/payments/test/support/pgtest"
)

const testTopic = "test.transferencia.solicitada"

// outboxDB is a transfers database of its own, whose outbox a test fills
// and drains by hand, as the service's POST and a relay would: the test
// decides when events are published, and moves the database's clock for
// them (passTime), so that what the controller reads does not depend on
// how fast the machine runs.
type outboxDB struct {
	dsn  string
	pool *pgxpool.Pool
	db   *pg.DB
	ob   *outbox.Outbox
	// passed is when passTime last moved the rows.
	passed time.Time
}

func newOutboxDB(tb testing.TB) *outboxDB {
	tb.Helper()
	dsn := pgtest.NewDSN(tb, migrations.ForService("transfers")...)
	pool := openPool(tb, dsn)
	db := pg.Wrap(pool)
	return &outboxDB{dsn: dsn, pool: pool, db: db, ob: outbox.New(db), passed: time.Now()}
}

// openPool opens another pool on dsn: another instance of the service.
func openPool(tb testing.TB, dsn string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// enqueue commits one event per key, in order, in one transaction.
func (o *outboxDB) enqueue(tb testing.TB, keys ...string) []uuid.UUID {
	tb.Helper()
	if len(keys) == 0 {
		return nil
	}
	msgs := make([]events.Message, len(keys))
	ids := make([]uuid.UUID, len(keys))
	for i, k := range keys {
		ids[i] = uuid.New()
		msgs[i] = events.Message{ID: ids[i], Topic: testTopic, Key: k, Type: "TransferenciaSolicitada", Payload: []byte(`{}`)}
	}
	err := o.db.InTx(context.Background(), func(tx pgx.Tx) error { return o.ob.Enqueue(context.Background(), tx, msgs...) })
	if err != nil {
		tb.Fatal(err)
	}
	return ids
}

func (o *outboxDB) exec(tb testing.TB, sql string, args ...any) int64 {
	tb.Helper()
	tag, err := o.pool.Exec(context.Background(), sql, args...)
	if err != nil {
		tb.Fatalf("%s: %v", strings.TrimSpace(sql), err)
	}
	return tag.RowsAffected()
}

// passTime makes d pass for the outbox's rows since the last call,
// whatever time really passed: every row's enqueued_at moves back by d
// less the real time since then, so that the database's ages follow the
// test's clock however fast the machine runs.
func (o *outboxDB) passTime(tb testing.TB, d time.Duration) {
	tb.Helper()
	now := time.Now()
	o.exec(tb, `UPDATE outbox_event SET enqueued_at = enqueued_at - $1::bigint * interval '1 microsecond'`, (d - now.Sub(o.passed)).Microseconds())
	o.passed = now
}

// age sets the rows' enqueued_at to d before now.
func (o *outboxDB) age(tb testing.TB, ids []uuid.UUID, d time.Duration) {
	tb.Helper()
	o.exec(tb, `UPDATE outbox_event SET enqueued_at = now() - $2::bigint * interval '1 microsecond' WHERE id = ANY($1)`, ids, d.Microseconds())
}

// dead sets the rows DEAD, as the relay does to an event the broker
// refuses for good.
func (o *outboxDB) dead(tb testing.TB, ids ...uuid.UUID) {
	tb.Helper()
	o.exec(tb, `UPDATE outbox_event SET status = 'DEAD', attempts = attempts + 1, last_error = 'refused' WHERE id = ANY($1)`, ids)
}

// publish does what a relay does: it marks up to n pending events
// PUBLISHED in seq order (n < 0: all of them), never one waiting for a
// retry nor one behind a DEAD or retry-waiting event of its key, and
// returns how many.
func (o *outboxDB) publish(tb testing.TB, n int) int {
	tb.Helper()
	var limit *int
	if n >= 0 {
		limit = &n
	}
	return int(o.exec(tb, `
UPDATE outbox_event SET status = 'PUBLISHED', published_at = now()
 WHERE id IN (SELECT e.id FROM outbox_event e
               WHERE e.status = 'PENDING' AND e.next_attempt_at <= now()
                 AND NOT EXISTS (SELECT 1 FROM outbox_event d
                                  WHERE (d.status = 'DEAD' OR (d.status = 'PENDING' AND d.next_attempt_at > now()))
                                    AND d.topic = e.topic AND d.key = e.key AND d.seq < e.seq)
               ORDER BY e.seq LIMIT $1)`, limit))
}

func readBacklog(tb testing.TB, r admission.BacklogReader) admission.Reading {
	tb.Helper()
	b, err := r.Backlog(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// The backlog counts what a relay can send: pending, leased and
// retry-waiting events, but not those held back behind a DEAD event of
// their key (same topic and key, older seq); its age is the oldest of the
// sendable ones, however old the held ones are. Enqueued and Left count
// every event, held ones too.
func TestBacklogCountsOnlyWhatTheRelayCanSend(t *testing.T) {
	t.Parallel()
	o := newOutboxDB(t)
	r := admission.NewBacklog(o.db)
	if got := readBacklog(t, r); got != (admission.Reading{}) {
		t.Fatalf("empty outbox: backlog %+v, want zero", got)
	}

	before := o.enqueue(t, "acct-1")         // older than the dead one: sendable
	dead := o.enqueue(t, "acct-1")           // refused for good
	held := o.enqueue(t, "acct-1", "acct-1") // behind it: held
	free := o.enqueue(t, "acct-2", "acct-3") // other keys: sendable
	leased := o.enqueue(t, "acct-4")         // PROCESSING: sendable
	retrying := o.enqueue(t, "acct-5")       // waiting for a retry: sendable
	published := o.enqueue(t, "acct-6")      // done
	o.dead(t, dead...)
	o.exec(t, `UPDATE outbox_event SET status = 'PROCESSING', locked_by = 'r/1', locked_until = now() + interval '30 s' WHERE id = ANY($1)`, leased)
	o.exec(t, `UPDATE outbox_event SET attempts = 2, next_attempt_at = now() + interval '1 h' WHERE id = ANY($1)`, retrying)
	o.exec(t, `UPDATE outbox_event SET status = 'PUBLISHED', published_at = now() WHERE id = ANY($1)`, published)
	// Another topic with the dead event's key is not held by it.
	other := uuid.New()
	o.exec(t, `INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, headers, occurred_at)
VALUES ($1, '', '', 'other.topic', 'acct-1', 'X', '{}', '{}', now())`, other)

	o.age(t, held, time.Hour)
	o.age(t, dead, time.Hour)
	o.age(t, before, 30*time.Second)
	o.age(t, append(append(append(free, leased...), retrying...), other), 10*time.Second)

	got := readBacklog(t, r)
	if want := int64(len(before) + len(free) + len(leased) + len(retrying) + 1); got.Pending != want {
		t.Errorf("pending %d, want %d (the held ones left out)", got.Pending, want)
	}
	if got.OldestAge < 30*time.Second || got.OldestAge >= time.Hour {
		t.Errorf("oldest age %v, want that of the oldest sendable event (30s, not the held ones' hour)", got.OldestAge)
	}
	// Ten events enqueued; the DEAD and the published one have left.
	if diff := cmp.Diff([2]int64{10, 2}, [2]int64{got.Enqueued, got.Left}); diff != "" {
		t.Errorf("enqueued and left mismatch (-want +got):\n%s", diff)
	}

	// The operator discards the dead event: its key flows again, and the
	// held events count (they are the oldest now).
	o.exec(t, `UPDATE outbox_event SET status = 'DISCARDED' WHERE id = ANY($1)`, dead)
	got = readBacklog(t, r)
	if want := int64(len(before) + len(held) + len(free) + len(leased) + len(retrying) + 1); got.Pending != want {
		t.Errorf("after the discard: pending %d, want %d", got.Pending, want)
	}
	if got.OldestAge < time.Hour {
		t.Errorf("after the discard: oldest age %v, want the released events' hour", got.OldestAge)
	}
}

// steadyLoad is a load on the door: each refresh interval, every client
// offers perRound requests; each admitted one commits an outbox event
// (its account's key, taken in turn from keys), and the relay then
// publishes what it can send, up to relayPerRound (negative: all).
type steadyLoad struct {
	o             *outboxDB
	clk           *clock
	refresh       time.Duration
	clients       []string
	perRound      int
	keys          []string
	relayPerRound int
	next          int
	// shared, if set, is what every controller reads: one reading of
	// the database a round (see TestInstancesWithSkewedPartitionsJudgeAlike).
	shared *sharedReading
}

// sharedReading hands every instance one reading of the database, taken
// once a round, so that a test compares the instances' judgement of the
// same figure, not the few milliseconds between two reads of a clock
// that keeps running.
type sharedReading struct {
	from admission.BacklogReader
	r    admission.Reading
}

func (s *sharedReading) Backlog(context.Context) (admission.Reading, error) { return s.r, nil }

// round runs one refresh interval on the given instances (the same
// clients offering the same load to each), advancing the database's
// clock with the controllers'. It returns what each instance admitted
// and how many events the relay published.
func (l *steadyLoad) round(tb testing.TB, ctrls ...*admission.Controller) (admitted []int, published int) {
	tb.Helper()
	admitted = make([]int, len(ctrls))
	var keys []string
	for i, c := range ctrls {
		for range l.perRound {
			for _, client := range l.clients {
				if ok, _ := c.Admit(client); ok {
					admitted[i]++
					keys = append(keys, l.keys[l.next%len(l.keys)])
					l.next++
				}
			}
		}
	}
	l.o.enqueue(tb, keys...)
	published = l.o.publish(tb, l.relayPerRound)
	l.clk.advance(l.refresh)
	l.o.passTime(tb, l.refresh)
	if l.shared != nil {
		l.shared.r = readBacklog(tb, l.shared.from)
	}
	for _, c := range ctrls {
		refresh(tb, c)
	}
	return admitted, published
}

// One DEAD event under steady load does not keep the door shut. A backlog
// over the bound sheds; then the relay catches up with everything it can
// send, while one account's events stay held behind a DEAD one and their
// age grows (the load keeps adding to that account): the admitted rate
// climbs back to the offered rate and shedding stops, with no operator.
func TestADeadEventDoesNotKeepTheDoorShut(t *testing.T) {
	t.Parallel()
	o := newOutboxDB(t)
	clk := newClock()
	const refreshEvery = 250 * time.Millisecond
	c := admission.New(admission.Config{MaxAge: 2 * time.Second, Refresh: refreshEvery}, admission.NewBacklog(o.db), clk.now, nil)
	l := &steadyLoad{o: o, clk: clk, refresh: refreshEvery, clients: []string{"a", "b"}, perRound: 10,
		keys: []string{"acct-dead", "acct-1", "acct-2", "acct-3"}, relayPerRound: -1}

	// Steady, under the bound: everything admitted.
	for range 4 {
		if got, _ := l.round(t, c); got[0] != 20 {
			t.Fatalf("under the bound admitted %d of 20", got[0])
		}
	}
	// One of acct-dead's events is refused for good; then the relay
	// stalls for 5 s: the backlog passes the bound and the door sheds.
	dead := o.enqueue(t, "acct-dead")
	o.dead(t, dead...)
	l.relayPerRound = 0
	shedAt := -1
	for i := range 20 {
		if got, _ := l.round(t, c); got[0] < 20 && shedAt < 0 {
			shedAt = i
		}
	}
	if shedAt < 0 {
		t.Fatal("a relay stalled for 5 s: nothing was shed")
	}
	// The relay sends again: everything but what is held behind the DEAD
	// event goes out each round. The door must open within a few seconds
	// and stay open.
	l.relayPerRound = -1
	var last []int
	for range 40 { // 10 s
		got, _ := l.round(t, c)
		last = append(last, got[0])
	}
	held := readHeld(t, o)
	t.Logf("admitted per round after the relay resumed: %v; %d events held behind the DEAD one", last, held)
	if held == 0 {
		t.Fatal("no event held behind the DEAD one: the test tests nothing")
	}
	for i, n := range last[len(last)-8:] {
		if n != 20 {
			t.Fatalf("round %d of the last 2 s admitted %d of 20: the door stayed shut behind a DEAD event", i, n)
		}
	}
}

// One key waiting for a retry (its partition's leader is being elected)
// holds the oldest event while the relay publishes every other key's: the
// backlog passes the bound and the door sheds, but the outbox is not
// stalled and the relay keeps up with the rest, so the admitted rate
// holds; it does not fall at each refresh. Once the key's retry goes out,
// the door opens again.
func TestOneKeyWaitingForARetryDoesNotShutTheDoor(t *testing.T) {
	t.Parallel()
	o := newOutboxDB(t)
	clk := newClock()
	const refreshEvery = 250 * time.Millisecond
	c := admission.New(admission.Config{MaxAge: 2 * time.Second, MaxLatency: time.Second, Refresh: refreshEvery},
		admission.NewBacklog(o.db), clk.now, nil)
	l := &steadyLoad{o: o, clk: clk, refresh: refreshEvery, clients: []string{"a", "b"}, perRound: 10,
		keys: []string{"acct-stuck", "acct-1", "acct-2", "acct-3"}, relayPerRound: -1}
	round := func() int {
		got, published := l.round(t, c)
		created := make([]time.Time, published)
		for i := range created {
			created[i] = clk.now().Add(-100 * time.Millisecond)
		}
		c.Settled(created)
		return got[0]
	}
	for range 8 {
		if n := round(); n != 20 {
			t.Fatalf("under the bound admitted %d of 20", n)
		}
	}
	// acct-stuck's next event fails and waits for its retry: it and the
	// key's later events stay; the others flow.
	stuck := o.enqueue(t, "acct-stuck")
	o.exec(t, `UPDATE outbox_event SET attempts = 1, next_attempt_at = now() + interval '1 hour' WHERE id = ANY($1)`, stuck)
	var during []int
	for range 60 { // 15 s
		during = append(during, round())
	}
	t.Logf("admitted per round while one key waits: %v", during)
	shed, late := 0, 0
	for i, n := range during {
		if n < 20 {
			shed++
		}
		if i >= len(during)-8 {
			late += n
		}
	}
	if shed == 0 {
		t.Fatal("the waiting key's events passed the bound and nothing was shed: the test tests nothing")
	}
	if late < 8*20/2 {
		t.Errorf("the last 2 s of one key waiting admitted %d of 160: the door closed while the relay kept up with every other key", late)
	}
	// The retry goes out: the door opens again.
	o.exec(t, `UPDATE outbox_event SET next_attempt_at = now() WHERE id = ANY($1)`, stuck)
	var after []int
	for range 40 {
		after = append(after, round())
	}
	t.Logf("admitted per round after the retry: %v", after)
	for i, n := range after[len(after)-8:] {
		if n != 20 {
			t.Fatalf("round %d of the last 2 s after the retry admitted %d of 20", i, n)
		}
	}
}

func readHeld(tb testing.TB, o *outboxDB) int {
	tb.Helper()
	var n int
	if err := o.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_event e WHERE e.status = 'PENDING'
   AND EXISTS (SELECT 1 FROM outbox_event d WHERE d.status = 'DEAD' AND d.topic = e.topic AND d.key = e.key AND d.seq < e.seq)`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// Two instances with a skewed partition assignment judge the same backlog.
// Instance A's projection holds every partition of the results (it is
// told of every settled transfer, its own and B's); B's holds none.
// Offered more than the relay takes, the backlog passes the bound while
// the relay keeps publishing (the head moves): both instances shed, at
// the same rate, clamped to their share of what the relay takes, and
// recover alike; B does not close its door because its own projection
// settles nothing, and A does not keep admitting as if the whole flow
// were its own. When the relay stops for good, both fall alike.
func TestInstancesWithSkewedPartitionsJudgeAlike(t *testing.T) {
	t.Parallel()
	o := newOutboxDB(t)
	clk := newClock()
	const refreshEvery = 250 * time.Millisecond
	cfg := admission.Config{MaxAge: 2 * time.Second, MaxLatency: time.Second, Refresh: refreshEvery}
	// Each instance reads the database through its own pool: the same
	// figures.
	readA, readB := admission.NewBacklog(o.db), admission.NewBacklog(pg.Wrap(openPool(t, o.dsn)))
	o.enqueue(t, "acct-1", "acct-2")
	gotA, gotB := readBacklog(t, readA), readBacklog(t, readB)
	gotA.OldestAge, gotA.ReadyAge, gotB.OldestAge, gotB.ReadyAge = 0, 0, 0, 0 // read a few ms apart
	if diff := cmp.Diff(gotA, gotB); diff != "" {
		t.Fatalf("two instances read different backlogs (-A +B):\n%s", diff)
	}
	// In the rounds they read it once for both (sharedReading): a round
	// compares their judgement of one figure.
	shared := &sharedReading{from: readA}
	a := admission.New(cfg, shared, clk.now, nil)
	b := admission.New(cfg, shared, clk.now, nil)
	// 2 clients x 10 a round on each instance: 160/s offered in all; the
	// relay and the flow behind it take 28 a round (112/s).
	l := &steadyLoad{o: o, clk: clk, refresh: refreshEvery, clients: []string{"a", "b"}, perRound: 10,
		keys: []string{"acct-1", "acct-2", "acct-3", "acct-4"}, relayPerRound: 28, shared: shared}
	settle := func(n int) {
		created := make([]time.Time, n)
		for i := range created {
			created[i] = clk.now().Add(-100 * time.Millisecond) // in time: the latency bound is not what sheds
		}
		a.Settled(created)
	}
	var sumA, sumB, offered int
	shedA, shedB := 0, 0
	var perA, perB []int
	for i := range 80 { // 20 s
		got, published := l.round(t, a, b)
		settle(published)
		if got[0] < 20 {
			shedA++
		}
		if got[1] < 20 {
			shedB++
		}
		perA, perB = append(perA, got[0]), append(perB, got[1])
		if i >= 40 { // the last 10 s
			sumA, sumB, offered = sumA+got[0], sumB+got[1], offered+20
		}
	}
	age := readBacklog(t, admission.NewBacklog(o.db)).OldestAge
	t.Logf("admitted per round: A %v", perA)
	t.Logf("admitted per round: B %v", perB)
	t.Logf("overloaded: rounds shed A %d B %d of 80; last 10 s admitted A %d B %d of %d each; backlog age %v", shedA, shedB, sumA, sumB, offered, age)
	if shedA == 0 || shedB == 0 {
		t.Fatalf("offered 1.4x what the relay takes: A shed in %d rounds, B in %d; want both shedding", shedA, shedB)
	}
	if sumA == offered || sumB == offered {
		t.Fatalf("the last 10 s: A admitted %d, B %d of %d: want both shedding", sumA, sumB, offered)
	}
	if lo, hi := min(sumA, sumB), max(sumA, sumB); float64(lo) < 0.8*float64(hi) {
		t.Errorf("the last 10 s: A admitted %d, B %d: the instances judge the same backlog differently", sumA, sumB)
	}
	if float64(sumB) < 0.3*float64(offered) {
		t.Errorf("B admitted %d of %d while the relay kept publishing: its door closed on its own", sumB, offered)
	}

	// The relay stops: nothing is published, nothing settles. Both
	// instances fall, alike.
	l.relayPerRound = 0
	sumA, sumB = 0, 0
	perA, perB = nil, nil
	for i := range 40 {
		got, _ := l.round(t, a, b)
		perA, perB = append(perA, got[0]), append(perB, got[1])
		if i >= 32 { // the last 2 s
			sumA, sumB = sumA+got[0], sumB+got[1]
		}
	}
	t.Logf("relay stopped, admitted per round: A %v", perA)
	t.Logf("relay stopped, admitted per round: B %v", perB)
	t.Logf("relay stopped: the last 2 s admitted A %d B %d of 160 each", sumA, sumB)
	if sumA > 40 || sumB > 40 {
		t.Errorf("the relay stopped for 10 s: the last 2 s admitted A %d, B %d of 160: want both at a trickle", sumA, sumB)
	}
}

// The backlog's statement stays linear in the backlog: it reads the
// unpublished rows through their partial index and the DEAD rows through
// theirs, hashes the DEAD ones once, with no sort, no nested loop and no
// scan of the published rows, whatever the statistics say (analysed full
// of published rows, or after a burst they do not know of).
func TestBacklogPlanIsLinear(t *testing.T) {
	t.Parallel()
	o := newOutboxDB(t)
	ctx := context.Background()
	// 50,000 published rows, 2,000 pending over 500 keys, the oldest of
	// 20 keys DEAD with their keys' later rows held.
	o.exec(t, `
INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, headers, occurred_at, status, published_at)
SELECT gen_random_uuid(), '', '', $1, 'k' || (g % 500), 'X', '{}', '{}', now(), 'PUBLISHED', now() FROM generate_series(1, 50000) g`, testTopic)
	o.exec(t, `ANALYZE outbox_event`)
	o.exec(t, `
INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, headers, occurred_at)
SELECT gen_random_uuid(), '', '', $1, 'k' || (g % 500), 'X', '{}', '{}', now() FROM generate_series(1, 2000) g`, testTopic)
	o.exec(t, `UPDATE outbox_event SET status = 'DEAD' WHERE id IN (
  SELECT DISTINCT ON (key) id FROM outbox_event WHERE status = 'PENDING' AND key IN (SELECT 'k' || g FROM generate_series(1, 20) g) ORDER BY key, seq)`)
	for _, analyse := range []bool{false, true} {
		t.Run(fmt.Sprintf("analysed=%v", analyse), func(t *testing.T) {
			if analyse {
				o.exec(t, `ANALYZE outbox_event`)
			}
			var lines []string
			err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, admission.PlanSQL); err != nil {
					return err
				}
				rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS) `+admission.SendableSQL)
				if err != nil {
					return err
				}
				lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n")
			t.Logf("plan:\n%s", plan)
			if !strings.Contains(plan, "Hash Left Join") && !strings.Contains(plan, "Hash Right Join") {
				t.Errorf("the backlog's plan has no hash join: it may read every DEAD row for every unpublished one")
			}
			for _, bad := range []string{"Sort", "Seq Scan on outbox_event", "Nested Loop"} {
				if strings.Contains(plan, bad) {
					t.Errorf("the backlog's plan has a %q: it reads more than the unpublished and DEAD rows", bad)
				}
			}
			b := readBacklog(t, admission.NewBacklog(o.db))
			if diff := cmp.Diff(int64(2000-20-(20*(2000/500-1))), b.Pending); diff != "" {
				t.Errorf("pending mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
