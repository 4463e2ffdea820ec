package analysis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
	"github.com/paysuite/payments/test/support/poll"
)

// verdict is what a decision says, without its clock readings.
type verdict struct {
	TransferID uuid.UUID
	Duplicate  bool
	Outcome    analysis.Outcome
	Score      int
	Rules      []string
	EventID    uuid.UUID
}

func verdictOf(r analysis.Result) verdict {
	d := r.Decision
	return verdict{TransferID: d.TransferID, Duplicate: r.Duplicate, Outcome: d.Outcome, Score: d.Score,
		Rules: append([]string{}, d.Rules...), EventID: d.EventID}
}

// emitted is an outbox row without its clock readings, in enqueue order.
type emitted struct {
	ID    uuid.UUID
	Topic string
	Key   string
	Type  string
}

func emittedRows(tb testing.TB, dsn string) []emitted {
	tb.Helper()
	var out []emitted
	for _, r := range outboxRows(tb, dsn) {
		out = append(out, emitted{r.ID, r.Topic, r.Key, r.Type})
	}
	return out
}

// TestBatchDecidesAsOneByOne decides the same requests twice, on two
// databases: one by one with Analyse, and in batches with AnalyseBatch. The
// verdicts, the stored decisions and the events, in their order, must be
// the same: in particular, a transfer's velocity history counts the
// transfers of its account approved earlier in the same batch.
func TestBatchDecidesAsOneByOne(t *testing.T) {
	t.Parallel()
	// In the past, so that no request is in the future.
	t0 := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second)
	series := func(account, client string, n int, amount int64, every time.Duration) []events.Requested {
		out := make([]events.Requested, n)
		for i := range out {
			out[i] = request(account, amount, t0.Add(time.Duration(i)*every))
			out[i].ClientID = client
		}
		return out
	}
	interleave := func(a, b []events.Requested) []events.Requested {
		var out []events.Requested
		for i := range max(len(a), len(b)) {
			if i < len(a) {
				out = append(out, a[i])
			}
			if i < len(b) {
				out = append(out, b[i])
			}
		}
		return out
	}
	amountCfg := risk.DefaultConfig()
	amountCfg.VelocityMaxCount = 0
	amountCfg.VelocityMaxCents = 1_000_000
	redelivered := series("CC-001", "app", 25, 100, time.Second)
	redelivered = append(redelivered, redelivered[3], redelivered[21], redelivered[0])
	tests := []struct {
		name string
		cfg  risk.Config
		// before are decided one by one on both databases first.
		before []events.Requested
		reqs   []events.Requested
		// batch is the batch size (all of reqs when 0).
		batch     int
		wantBlock int
	}{
		{name: "25 transfers of one account: velocity_count trips at the 21st",
			cfg: risk.DefaultConfig(), reqs: series("CC-001", "app", 25, 100, time.Second), wantBlock: 5},
		{name: "the same in batches of 7: history from the database and from the batch",
			cfg: risk.DefaultConfig(), reqs: series("CC-001", "app", 25, 100, time.Second), batch: 7, wantBlock: 5},
		{name: "history decided before the batch",
			cfg: risk.DefaultConfig(), before: series("CC-001", "app", 15, 100, time.Second),
			reqs: series("CC-001", "app", 10, 100, time.Minute), wantBlock: 5},
		{name: "velocity_amount trips mid-batch",
			cfg: amountCfg, reqs: series("CC-001", "app", 12, 150_000, time.Second), wantBlock: 6},
		{name: "earlier transfers leave the window within the batch",
			cfg: risk.DefaultConfig(), reqs: series("CC-001", "app", 60, 100, 2*time.Minute), wantBlock: 20},
		{name: "two clients on one account and a second account, interleaved",
			cfg: risk.DefaultConfig(),
			reqs: interleave(interleave(series("CC-001", "app", 24, 100, time.Second), series("CC-001", "other", 22, 100, time.Second)),
				series("CC-009", "app", 23, 100, time.Second)),
			wantBlock: 4 + 2 + 3},
		{name: "redeliveries within the batch get the first decision",
			cfg: risk.DefaultConfig(), reqs: redelivered, wantBlock: 5},
		{name: "blocked transfers do not count",
			cfg: risk.DefaultConfig(), reqs: append(series("CC-001", "app", 5, 10_000_000, time.Second),
				series("CC-001", "app", 21, 100, time.Second)...), wantBlock: 5 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			oneDSN, batchDSN := newDSN(t), newDSN(t)
			one, batched := newService(t, oneDSN, tt.cfg), newService(t, batchDSN, tt.cfg)
			for _, req := range tt.before {
				for _, svc := range []*analysis.Service{one, batched} {
					if _, err := svc.Analyse(ctx, req); err != nil {
						t.Fatal(err)
					}
				}
			}
			var want, got []verdict
			for _, req := range tt.reqs {
				res, err := one.Analyse(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, verdictOf(res))
			}
			size := tt.batch
			if size == 0 {
				size = len(tt.reqs)
			}
			for start := 0; start < len(tt.reqs); start += size {
				var reqs []analysis.Request
				for _, req := range tt.reqs[start:min(start+size, len(tt.reqs))] {
					reqs = append(reqs, analysis.Request{Transfer: req})
				}
				rs, err := batched.AnalyseBatch(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					got = append(got, verdictOf(r))
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("batch verdicts differ from one-by-one (-one +batch):\n%s", diff)
			}
			blocked := 0
			for _, v := range want {
				if !v.Duplicate && v.Outcome == analysis.Blocked {
					blocked++
				}
			}
			if blocked != tt.wantBlock {
				t.Errorf("%d blocked one by one, want %d: the case does not test what it says", blocked, tt.wantBlock)
			}
			if diff := cmp.Diff(emittedRows(t, oneDSN), emittedRows(t, batchDSN)); diff != "" {
				t.Errorf("batch events differ from one-by-one (-one +batch):\n%s", diff)
			}
			if diff := cmp.Diff(storedVerdicts(t, oneDSN), storedVerdicts(t, batchDSN)); diff != "" {
				t.Errorf("stored decisions differ (-one +batch):\n%s", diff)
			}
		})
	}
}

// storedVerdicts reads every stored decision back through a fresh
// redelivery of nothing: the table's rows by transfer id.
func storedVerdicts(tb testing.TB, dsn string) map[uuid.UUID]verdict {
	tb.Helper()
	pool := openPool(tb, dsn)
	rows, err := pool.Query(context.Background(), `SELECT transfer_id, outcome, score, rules, event_id FROM decision`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]verdict{}
	for rows.Next() {
		var v verdict
		var outcome string
		if err := rows.Scan(&v.TransferID, &outcome, &v.Score, &v.Rules, &v.EventID); err != nil {
			tb.Fatal(err)
		}
		v.Outcome = analysis.Outcome(outcome)
		out[v.TransferID] = v
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestBatchIsAllOrNothing makes one transfer of a batch fail at the
// database: nothing of the batch is stored or enqueued, and the same batch
// without it then decides every other transfer once.
func TestBatchIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := newDSN(t)
	svc := newService(t, dsn, risk.DefaultConfig())
	pool := openPool(t, dsn)
	// A transfer the database refuses, as a constraint or a fault would.
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.source_account = 'CC-POISON' THEN RAISE EXCEPTION 'poison transfer %', NEW.transfer_id; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT ON decision FOR EACH ROW EXECUTE FUNCTION refuse_poison();`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var reqs []analysis.Request
	for i := range 10 {
		account := "CC-001"
		if i == 6 {
			account = "CC-POISON"
		}
		reqs = append(reqs, analysis.Request{Transfer: request(account, 100, now)})
	}
	if _, err := svc.AnalyseBatch(ctx, reqs); err == nil {
		t.Fatal("AnalyseBatch succeeded with a transfer the database refuses")
	}
	if n := countDecisions(t, dsn); n != 0 {
		t.Errorf("%d decisions stored by the failed batch, want 0", n)
	}
	if n := len(outboxRows(t, dsn)); n != 0 {
		t.Errorf("%d events enqueued by the failed batch, want 0", n)
	}

	good := append(append([]analysis.Request{}, reqs[:6]...), reqs[7:]...)
	rs, err := svc.AnalyseBatch(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	var want, got []emitted
	for i, r := range rs {
		if r.Duplicate || r.Decision.TransferID != good[i].Transfer.TransferID {
			t.Errorf("result %d = %+v, want a new decision of %s", i, verdictOf(r), good[i].Transfer.TransferID)
		}
		want = append(want, emitted{events.DerivedID("analisada", good[i].Transfer.TransferID), topics.Analysed, "CC-001", events.TypeAnalysed})
	}
	got = emittedRows(t, dsn)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
}

// TestBatchRefusesATransferDecidedConcurrently: a decision stored between
// the batch's read and its insert (another instance, under another source
// account's lock) fails the whole batch with ErrDuplicate, for the caller
// to decide its transfers one by one.
func TestBatchRefusesATransferDecidedConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := newDSN(t)
	svc := newService(t, dsn, risk.DefaultConfig())
	pool := openPool(t, dsn)
	req := request("CC-001", 100, time.Now().UTC())
	// The other instance's decision appears once the batch has read the
	// stored decisions: its insert is what meets it.
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION sneak_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO decision (transfer_id, request_event_id, source_account, dest_account, amount_cents, currency,
                          occurred_at, score, threshold, outcome, rules, event_id, decided_at, client_id)
    VALUES (NEW.transfer_id, NEW.request_event_id, 'CC-777', NEW.dest_account, NEW.amount_cents, NEW.currency,
            NEW.occurred_at, 10, 80, 'APPROVED', '{}', gen_random_uuid(), now(), '')
    ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;
CREATE TRIGGER sneak_in BEFORE INSERT ON decision FOR EACH ROW WHEN (NEW.source_account = 'CC-001') EXECUTE FUNCTION sneak_in();`); err != nil {
		t.Fatal(err)
	}
	_, err := svc.AnalyseBatch(ctx, []analysis.Request{{Transfer: request("CC-002", 100, time.Now().UTC())}, {Transfer: req}})
	if !errors.Is(err, analysis.ErrDuplicate) {
		t.Fatalf("AnalyseBatch = %v, want ErrDuplicate", err)
	}
	if n := countDecisions(t, dsn); n != 0 {
		t.Errorf("%d decisions stored by the failed batch, want 0", n)
	}
	if n := len(outboxRows(t, dsn)); n != 0 {
		t.Errorf("%d events enqueued by the failed batch, want 0", n)
	}
}

// TestAnalyseLosesToAConcurrentDecisionUnderAnotherLock: while another
// instance holds an uncommitted decision of the same transfer id, taken
// under another source account's lock, Analyse's insert waits for it; once
// it commits, Analyse returns that decision as a duplicate and writes
// nothing (its batch of one meets ErrDuplicate and is run once more).
func TestAnalyseLosesToAConcurrentDecisionUnderAnotherLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := newDSN(t)
	svc := newService(t, dsn, risk.DefaultConfig())
	pool := openPool(t, dsn)
	req := request("CC-001", 100, time.Now().UTC())
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if _, err := other.Exec(ctx, `
INSERT INTO decision (transfer_id, request_event_id, source_account, dest_account, amount_cents, currency,
                      occurred_at, score, threshold, outcome, rules, event_id, decided_at, client_id)
VALUES ($1, $2, 'CC-777', 'CC-002', 100, 'BRL', now(), 10, 80, 'APPROVED', '{}', $3, now(), '')`,
		req.TransferID, req.EventID, events.DerivedID("analisada", req.TransferID)); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res analysis.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := svc.Analyse(ctx, req)
		done <- outcome{res, err}
	}()
	poll.Until(t, 10*time.Second, "Analyse waiting on the other instance's row", func() (bool, string) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n > 0, "no session waits on a lock"
	})
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatalf("Analyse = %v, want the other instance's decision", got.err)
	}
	if !got.res.Duplicate || got.res.Decision.SourceAccount != "CC-777" {
		t.Errorf("Analyse = duplicate %v, source %q; want the other instance's decision (CC-777) as a duplicate",
			got.res.Duplicate, got.res.Decision.SourceAccount)
	}
	if n := countDecisions(t, dsn); n != 1 {
		t.Errorf("%d decisions, want 1", n)
	}
	if n := len(outboxRows(t, dsn)); n != 0 {
		t.Errorf("%d events enqueued, want 0", n)
	}
}
