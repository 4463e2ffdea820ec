package consume_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/transfers/internal/consume"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/test/support/pgtest"
)

var topics = events.DefaultTopics.WithSuffix(".test")

type fixture struct {
	db    *pg.DB
	store *postgres.Store
	svc   *transfer.Service
	proj  *consume.Projection
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	return fixtureOn(pg.Wrap(pgtest.NewPool(t, migrations.ForService("transfers")...)))
}

// fixtureOn is the fixture on the transfers database db.
func fixtureOn(db *pg.DB) fixture {
	store := postgres.NewStore(db, outbox.New(db), consume.Group, nil, 0)
	key, err := transfersig.NewKey()
	if err != nil {
		panic(err)
	}
	svc := transfer.NewService(store, topics, key)
	return fixture{db: db, store: store, svc: svc, proj: consume.NewProjection(store, nil, topics, slog.New(slog.DiscardHandler))}
}

func (f fixture) pending(t *testing.T) uuid.UUID {
	t.Helper()
	id := uuid.New()
	_, _, err := f.svc.Submit(context.Background(), transfer.Submission{
		ID:       id,
		Client:   "client-a",
		Request:  transfer.Request{Source: "CC-001", Destination: "CC-002", AmountCents: 100, Currency: "BRL"},
		Response: transfer.Response{StatusCode: 202, Body: []byte("{}")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func record(t *testing.T, topic string, v any) broker.Record {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return broker.Record{Topic: topic, Value: b}
}

// settled is the ledger's TransferenciaLiquidada of transfer id, with the
// event id derived for it, and no binding (an older producer's record).
func settled(id uuid.UUID) events.Settled {
	return events.Settled{EventID: events.DerivedID(events.KindSettled, id), TransferID: id, OccurredAt: time.Now().UTC()}
}

// rejected is the ledger's TransferenciaRejeitada of transfer id, with the
// event id derived for it, and no binding.
func rejected(id uuid.UUID, reason string) events.Rejected {
	return events.Rejected{EventID: events.DerivedID(events.KindRejectedLedger, id), TransferID: id, Reason: reason, OccurredAt: time.Now().UTC()}
}

// blocked is antifraud's TransferenciaRejeitada of transfer id.
func blocked(id uuid.UUID, reason string) events.Rejected {
	r := rejected(id, reason)
	r.EventID = events.DerivedID(events.KindRejectedAntifraud, id)
	return r
}

// operator reads every transfer.
var operator = transfer.Viewer{All: true}

type state struct {
	Status transfer.Status
	Reason string
}

// TestProjection applies sequences of results to a PENDENTE transfer; only
// the first result of a PENDENTE transfer counts.
func TestProjection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		records func(id uuid.UUID) []any // events.Settled or events.Rejected
		want    state
	}{
		{"settled", func(id uuid.UUID) []any { return []any{settled(id)} }, state{transfer.StatusSettled, ""}},
		{"rejected", func(id uuid.UUID) []any { return []any{rejected(id, events.ReasonInsufficientFunds)} },
			state{transfer.StatusRejected, events.ReasonInsufficientFunds}},
		{"settled twice (same event)", func(id uuid.UUID) []any { return []any{settled(id), settled(id)} },
			state{transfer.StatusSettled, ""}},
		{"rejected after settled", func(id uuid.UUID) []any {
			return []any{settled(id), blocked(id, events.ReasonBlockedByAntifraud)}
		}, state{transfer.StatusSettled, ""}},
		{"settled after rejected", func(id uuid.UUID) []any {
			return []any{rejected(id, events.ReasonAccountNotFound), settled(id)}
		}, state{transfer.StatusRejected, events.ReasonAccountNotFound}},
		{"rejected twice with other reasons", func(id uuid.UUID) []any {
			return []any{rejected(id, events.ReasonCurrencyMismatch), blocked(id, events.ReasonInsufficientFunds)}
		}, state{transfer.StatusRejected, events.ReasonCurrencyMismatch}},
		{"rejected: not the titular of the source", func(id uuid.UUID) []any { return []any{rejected(id, events.ReasonUnauthorizedSource)} },
			state{transfer.StatusRejected, events.ReasonUnauthorizedSource}},
		{"unknown future reason is kept", func(id uuid.UUID) []any { return []any{rejected(id, "LIMITE_DIARIO")} },
			state{transfer.StatusRejected, "LIMITE_DIARIO"}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" (one batch)", func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			id := f.pending(t)
			var ms []broker.Record
			for _, ev := range tt.records(id) {
				topic := topics.Settled
				if _, ok := ev.(events.Rejected); ok {
					topic = topics.Rejected
				}
				ms = append(ms, record(t, topic, ev))
			}
			if err := f.proj.Handle(ctx, ms); err != nil {
				t.Fatal(err)
			}
			got, err := f.svc.Get(ctx, id, operator)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, state{got.Status, got.Reason}); diff != "" {
				t.Errorf("state mismatch (-want +got):\n%s", diff)
			}
		})
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			id := f.pending(t)
			var afterFirst time.Time
			for i, ev := range tt.records(id) {
				topic := topics.Settled
				if _, ok := ev.(events.Rejected); ok {
					topic = topics.Rejected
				}
				if err := f.proj.Handle(ctx, []broker.Record{record(t, topic, ev)}); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				got, err := f.svc.Get(ctx, id, operator)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					afterFirst = got.UpdatedAt
				} else if !got.UpdatedAt.Equal(afterFirst) {
					t.Errorf("record %d changed atualizadaEm from %v to %v", i, afterFirst, got.UpdatedAt)
				}
			}
			got, err := f.svc.Get(ctx, id, operator)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, state{got.Status, got.Reason}); diff != "" {
				t.Errorf("state mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProjectionPoison: records that cannot be decoded or that the contract
// forbids are permanent errors (DLT at once) and change nothing.
func TestProjectionPoison(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.pending(t)
	tests := []struct {
		name string
		msg  broker.Record
	}{
		{"not JSON", broker.Record{Topic: topics.Settled, Value: []byte("{not json")}},
		{"missing transfer id", broker.Record{Topic: topics.Settled, Value: []byte(`{"eventoId":"` + uuid.NewString() + `","ocorridoEm":"2026-01-01T00:00:00Z"}`)}},
		{"missing event id", broker.Record{Topic: topics.Rejected, Value: []byte(`{"transferenciaId":"` + id.String() + `","motivo":"SALDO_INSUFICIENTE","ocorridoEm":"2026-01-01T00:00:00Z"}`)}},
		{"missing motivo", broker.Record{Topic: topics.Rejected, Value: []byte(`{"eventoId":"` + uuid.NewString() + `","transferenciaId":"` + id.String() + `","ocorridoEm":"2026-01-01T00:00:00Z"}`)}},
		{"garbage motivo", record(t, topics.Rejected, rejected(id, "'; DROP TABLE x; --"))},
		{"event id not a UUID", broker.Record{Topic: topics.Settled, Value: []byte(`{"eventoId":"x","transferenciaId":"` + id.String() + `","ocorridoEm":"2026-01-01T00:00:00Z"}`)}},
		{"unexpected topic", record(t, "other", settled(id))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.proj.Handle(ctx, []broker.Record{tt.msg})
			if err == nil || !consumer.IsPermanent(err) {
				t.Fatalf("Handle = %v, want a permanent error", err)
			}
		})
	}
	got, err := f.svc.Get(ctx, id, operator)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != transfer.StatusPending {
		t.Errorf("status = %s after poison records, want PENDENTE", got.Status)
	}
}

// TestProjectionHoldsUnknownTransfer: a result for a transfer this
// service does not have is not an error (no endless retries) and is not
// dropped: it is held with its event's id, type, transfer id and payload,
// and its event is marked in the inbox once; a redelivery, one by one or
// in a batch, holds nothing more. A result for a known transfer is never
// held, even when it changes nothing.
func TestProjectionHoldsUnknownTransfer(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "one by one", true: "batch"}[batch], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			lostS, lostR, known := uuid.New(), uuid.New(), f.pending(t)
			evS, evR := events.DerivedID(events.KindSettled, lostS), events.DerivedID(events.KindRejectedLedger, lostR)
			ms := []broker.Record{
				record(t, topics.Settled, settled(lostS)),
				record(t, topics.Rejected, rejected(lostR, events.ReasonInsufficientFunds)),
				record(t, topics.Settled, settled(known)),
			}
			deliver := func() {
				t.Helper()
				if batch {
					if err := f.proj.Handle(ctx, ms); err != nil {
						t.Fatalf("Handle = %v, want nil", err)
					}
					return
				}
				for _, m := range ms {
					if err := f.proj.Handle(ctx, []broker.Record{m}); err != nil {
						t.Fatalf("Handle = %v, want nil", err)
					}
				}
			}
			deliver()
			deliver() // a redelivery
			// The known transfer's result, redelivered once it is final,
			// changes nothing and is not held either.
			if err := f.proj.Handle(ctx, []broker.Record{record(t, topics.Rejected, rejected(known, events.ReasonBlockedByAntifraud))}); err != nil {
				t.Fatal(err)
			}

			type held struct {
				EventID, TransferID uuid.UUID
				Type                string
				Status              transfer.Status
				Reason              string
				Payload             map[string]any
			}
			payload := func(m broker.Record) map[string]any {
				var v map[string]any
				if err := json.Unmarshal(m.Value, &v); err != nil {
					t.Fatal(err)
				}
				return v
			}
			want := []held{
				{evS, lostS, events.TypeSettled, transfer.StatusSettled, "", payload(ms[0])},
				{evR, lostR, events.TypeRejected, transfer.StatusRejected, events.ReasonInsufficientFunds, payload(ms[1])},
			}
			hs, err := f.store.ListHeld(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []held
			for _, h := range hs {
				if h.Transfer != nil || h.Resolution != "" || h.ReceivedAt.IsZero() {
					t.Errorf("held %s: transfer %v, resolution %q, received %v; want none, none, set", h.EventID, h.Transfer, h.Resolution, h.ReceivedAt)
				}
				var p map[string]any
				if err := json.Unmarshal(h.Payload, &p); err != nil {
					t.Fatalf("held payload %q: %v", h.Payload, err)
				}
				got = append(got, held{h.EventID, h.TransferID, h.Type, h.Status, h.Reason, p})
			}
			sortHeld := cmpopts.SortSlices(func(a, b held) bool { return a.EventID.String() < b.EventID.String() })
			if diff := cmp.Diff(want, got, sortHeld); diff != "" {
				t.Errorf("held results mismatch (-want +got):\n%s", diff)
			}
			var rows, marks int
			if err := f.db.QueryRow(ctx, `SELECT count(*) FROM resultado_retido`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if err := f.db.QueryRow(ctx, `SELECT count(*) FROM inbox_event WHERE event_id = ANY($1)`, []uuid.UUID{evS, evR}).Scan(&marks); err != nil {
				t.Fatal(err)
			}
			if rows != 2 || marks != 2 {
				t.Errorf("%d held rows and %d inbox marks of their events, want 2 and 2", rows, marks)
			}
			if n, err := f.store.CountHeld(ctx); err != nil || n != 2 {
				t.Errorf("CountHeld = %d, %v; want 2", n, err)
			}
			if _, err := f.svc.Get(ctx, lostS, operator); !errors.Is(err, transfer.ErrNotFound) {
				t.Fatalf("Get unknown = %v, want ErrNotFound (holding creates no transfer)", err)
			}
		})
	}
}

// TestProjectionHoldsAnyDecodablePayload: a result is held whatever its
// payload holds that the decoder accepts (unknown fields, a \u0000 escape,
// bytes that are not UTF-8), never retried for ever.
func TestProjectionHoldsAnyDecodablePayload(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i, extra := range []string{`"\u0000"`, "\"\xff\xfe\"", `{"nested":[1,2]}`} {
		msg := func() broker.Record {
			id := uuid.New()
			return broker.Record{Topic: topics.Settled, Value: []byte(`{"eventoId":"` + events.DerivedID(events.KindSettled, id).String() + `","transferenciaId":"` +
				id.String() + `","ocorridoEm":"2026-12-01T10:00:00Z","extra":` + extra + `}`)}
		}
		if err := f.proj.Handle(ctx, []broker.Record{msg()}); err != nil {
			t.Fatalf("payload %d: Handle = %v, want it held", i, err)
		}
		if err := f.proj.Handle(ctx, []broker.Record{msg()}); err != nil {
			t.Fatalf("payload %d: Handle = %v, want it held", i, err)
		}
	}
	if n, err := f.store.CountHeld(ctx); err != nil || n != 6 {
		t.Errorf("CountHeld = %d, %v; want 6", n, err)
	}
}

// TestProjectionHoldIsAtomicWithTheInboxMark: when the held row cannot be
// written, the event is not marked either, so that the consumer loop's
// retry holds it then; nothing is lost in between.
func TestProjectionHoldIsAtomicWithTheInboxMark(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.db.Exec(ctx, `
CREATE FUNCTION refuse_held() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused'; END $$;
CREATE TRIGGER refuse_held BEFORE INSERT ON resultado_retido FOR EACH ROW EXECUTE FUNCTION refuse_held();`); err != nil {
		t.Fatal(err)
	}
	lost := uuid.New()
	ev := events.DerivedID(events.KindSettled, lost)
	m := record(t, topics.Settled, settled(lost))
	if err := f.proj.Handle(ctx, []broker.Record{m}); err == nil {
		t.Fatal("Handle succeeded although the held row was refused")
	}
	if err := f.proj.Handle(ctx, []broker.Record{m}); err == nil {
		t.Fatal("Handle succeeded although the held row was refused")
	}
	var marks int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM inbox_event WHERE event_id = $1`, ev).Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if marks != 0 {
		t.Fatalf("%d inbox marks after a refused hold, want 0", marks)
	}
	if _, err := f.db.Exec(ctx, `DROP TRIGGER refuse_held ON resultado_retido`); err != nil {
		t.Fatal(err)
	}
	if err := f.proj.Handle(ctx, []broker.Record{m}); err != nil {
		t.Fatal(err)
	}
	if n, err := f.store.CountHeld(ctx); err != nil || n != 1 {
		t.Errorf("CountHeld after the retry = %d, %v; want 1", n, err)
	}
}

// TestProjectionBatchIsAllOrNothing applies a batch of results for many
// transfers in which one result the database refuses: no transfer of the
// batch changes and no event id is recorded, so that the one-by-one pass
// the consumer loop then makes applies each result once. Without the
// failing record, the batch applies every result, an event already applied
// changing nothing. (A poison record stops a batch part way:
// TestProjectionBatchStoppedByPoison.)
func TestProjectionBatchIsAllOrNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var ids []uuid.UUID
	var ms []broker.Record
	for i := range 30 {
		id := f.pending(t)
		ids = append(ids, id)
		if i%3 == 0 {
			ms = append(ms, record(t, topics.Rejected, rejected(id, events.ReasonInsufficientFunds)))
		} else {
			ms = append(ms, record(t, topics.Settled, settled(id)))
		}
	}
	// Applied before the batch: its redelivery in the batch is a duplicate.
	if err := f.proj.Handle(ctx, []broker.Record{ms[4]}); err != nil {
		t.Fatal(err)
	}
	statuses := func() map[uuid.UUID]transfer.Status {
		out := map[uuid.UUID]transfer.Status{}
		for _, id := range ids {
			got, err := f.svc.Get(ctx, id, operator)
			if err != nil {
				t.Fatal(err)
			}
			out[id] = got.Status
		}
		return out
	}
	before := statuses()
	inboxRows := func() int {
		var n int
		if err := f.db.QueryRow(ctx, `SELECT count(*) FROM inbox_event`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A result the database refuses, as a constraint or a fault would.
	if _, err := f.db.Exec(ctx, `
CREATE FUNCTION refuse_transfer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused'; END $$;
CREATE TRIGGER refuse_transfer BEFORE UPDATE ON transferencia FOR EACH ROW
    WHEN (OLD.id = '`+ids[20].String()+`') EXECUTE FUNCTION refuse_transfer();`); err != nil {
		t.Fatal(err)
	}
	if err := f.proj.Handle(ctx, ms); err == nil {
		t.Fatal("Handle with a refused update succeeded")
	}
	if diff := cmp.Diff(before, statuses()); diff != "" {
		t.Errorf("failed batches changed transfers (-before +after):\n%s", diff)
	}
	if n := inboxRows(); n != 1 {
		t.Errorf("%d inbox rows after the failed batches, want 1 (the result applied before)", n)
	}

	if _, err := f.db.Exec(ctx, `DROP TRIGGER refuse_transfer ON transferencia`); err != nil {
		t.Fatal(err)
	}
	if err := f.proj.Handle(ctx, ms); err != nil {
		t.Fatal(err)
	}
	want := map[uuid.UUID]transfer.Status{}
	for i, id := range ids {
		want[id] = transfer.StatusSettled
		if i%3 == 0 {
			want[id] = transfer.StatusRejected
		}
	}
	if diff := cmp.Diff(want, statuses()); diff != "" {
		t.Errorf("statuses after the batch (-want +got):\n%s", diff)
	}
	if n := inboxRows(); n != len(ms) {
		t.Errorf("%d inbox rows, want %d", n, len(ms))
	}
}

// TestProjectionBatchStoppedByPoison applies a batch with a poison record
// after ten results: exactly those ten are applied and their event ids
// recorded, and Handle reports them done with a consumer.BatchFailure
// whose error is the poison record's, permanent (the loop sends it to the
// DLT and hands the rest on as a batch); no result after it is applied.
func TestProjectionBatchStoppedByPoison(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var ids []uuid.UUID
	var ms []broker.Record
	for range 20 {
		id := f.pending(t)
		ids = append(ids, id)
		ms = append(ms, record(t, topics.Settled, settled(id)))
	}
	poison := broker.Record{Topic: topics.Settled, Value: []byte("{not json")}
	withPoison := append(append(append([]broker.Record{}, ms[:10]...), poison), ms[10:]...)
	err := f.proj.Handle(ctx, withPoison)
	bf, ok := errors.AsType[*consumer.BatchFailure](err)
	if !ok || bf.Handled != 10 || !consumer.IsPermanent(bf.Err) {
		t.Fatalf("Handle with a poison record = %v, want a BatchFailure after 10 records with a permanent error", err)
	}
	want, got := map[uuid.UUID]transfer.Status{}, map[uuid.UUID]transfer.Status{}
	for i, id := range ids {
		want[id] = transfer.StatusPending
		if i < 10 {
			want[id] = transfer.StatusSettled
		}
		tr, err := f.svc.Get(ctx, id, operator)
		if err != nil {
			t.Fatal(err)
		}
		got[id] = tr.Status
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses after the stopped batch (-want +got):\n%s", diff)
	}
	var n int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM inbox_event`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Errorf("%d inbox rows, want 10 (the results before the poison record)", n)
	}
}

// What the projection moves is told to admission control after the
// commit: one creation time per transfer moved, none for a duplicate, a
// late result or a held one.
func TestProjectionTellsWhatItSettled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var told admissionLog
	f.proj = consume.NewProjection(f.store, &told, topics, slog.New(slog.DiscardHandler))
	before := time.Now()
	a, b := f.pending(t), f.pending(t)
	first := settled(a)
	batch := []broker.Record{
		record(t, topics.Settled, first),
		record(t, topics.Rejected, rejected(b, events.ReasonInsufficientFunds)),
		record(t, topics.Settled, first),               // a duplicate
		record(t, topics.Settled, settled(uuid.New())), // held: no such transfer
	}
	if err := f.proj.Handle(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := f.proj.Handle(ctx, []broker.Record{record(t, topics.Settled, settled(b))}); err != nil { // late: b is final
		t.Fatal(err)
	}
	if len(told) != 2 {
		t.Fatalf("told %d creation times, want 2 (the two transfers moved)", len(told))
	}
	for _, c := range told {
		if c.Before(before.Add(-time.Second)) || c.After(time.Now()) {
			t.Errorf("creation time %v is not the transfers' (created after %v)", c, before)
		}
	}
}

// admissionLog is a consume.Admission that keeps what it is told.
type admissionLog []time.Time

func (l *admissionLog) Settled(created []time.Time) { *l = append(*l, created...) }

// TestProjectionRunsOnItsGenericPlan applies ten batches of one result on
// one connection and reads that session's prepared statements: the
// projection's statement must have run on its generic plan every time.
// Left to PostgreSQL it is planned anew at each execution (a custom plan
// for the arrays at hand), which cost more than running it for a batch of
// one.
func TestProjectionRunsOnItsGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewSession(t, migrations.ForService("transfers")...) // one session, whose prepared statements the check reads
	f := fixtureOn(pg.Wrap(pool))
	const runs = 10
	for range runs {
		if err := f.proj.Handle(ctx, []broker.Record{record(t, topics.Settled, settled(f.pending(t)))}); err != nil {
			t.Fatal(err)
		}
	}
	var generic, custom int64
	if err := pool.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
 WHERE statement LIKE '%INSERT INTO inbox_event%'`).Scan(&generic, &custom); err != nil {
		t.Fatalf("the projection's prepared statement: %v", err)
	}
	if generic != runs || custom != 0 {
		t.Errorf("the projection's statement ran %d times on its generic plan and %d on a custom one, want %d and 0", generic, custom, runs)
	}

	// That plan was made on an almost empty table, as on a new deployment,
	// and serves the session for as long as the statistics stand. It must
	// still find the batch's transfers by key once the table has grown,
	// not read the whole table per batch.
	if _, err := pool.Exec(ctx, `INSERT INTO transferencia (id, conta_origem, conta_destino, valor_centavos, moeda, status,
    motivo_rejeicao, hash_requisicao, resposta_status, resposta_corpo)
SELECT gen_random_uuid(), 'CC-001', 'CC-002', 100, 'BRL', 'LIQUIDADA', NULL, sha256(i::text::bytea), 202, '{}'
  FROM generate_series(1, 5000) AS i`); err != nil {
		t.Fatal(err)
	}
	id := f.pending(t)
	before := pgtest.RowsRead(t, pool, "transferencia")
	if err := f.proj.Handle(ctx, []broker.Record{record(t, topics.Settled, settled(id))}); err != nil {
		t.Fatal(err)
	}
	// The transfer is read by the update and by the check for a result
	// that came before its transfer.
	if n := pgtest.RowsRead(t, pool, "transferencia") - before; n > 2 {
		t.Errorf("a batch of one on a table of 5,000 transfers read %d of its rows, want at most 2 (each found by its key)", n)
	}
}
