package consume_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/consume"
	"github.com/paysuite/payments/services/antifraud/internal/postgres"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
	"github.com/paysuite/payments/test/support/pgtest"
)

// TestBatchStoppedByAPoisonRecord hands the handler, on a real
// database, three valid records, an undecodable one and two more valid
// ones. It must decide the three before the bad record, and only those,
// and report them done with a consumer.BatchFailure whose error is the bad
// record's (permanent: the loop sends it to the DLT).
func TestBatchStoppedByAPoisonRecord(t *testing.T) {
	t.Parallel()
	db, err := pg.Open(t.Context(), pgtest.NewDSN(t, migrations.ForService("antifraud")...), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	engine, err := risk.New(risk.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	svc := analysis.NewService(postgres.NewStore(db, outbox.New(db)), engine,
		events.Topics{Analysed: "analisada", Rejected: "rejeitada"}, nil)
	var ms []broker.Record
	var ids []uuid.UUID
	for i := range 6 {
		if i == 3 {
			ms = append(ms, broker.Record{Topic: "solicitada", Key: []byte("CC-001"), Value: []byte("{")})
		}
		req := events.Requested{EventID: uuid.New(), TransferID: uuid.New(), SourceAccount: "CC-001", DestAccount: "CC-002",
			AmountCents: 100, Currency: "BRL", OccurredAt: time.Now().UTC().Add(-time.Minute)}
		v, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, broker.Record{Topic: "solicitada", Key: []byte("CC-001"), Value: v})
		ids = append(ids, req.TransferID)
	}

	err = consume.NewHandler(svc, slog.New(slog.DiscardHandler))(context.Background(), ms)

	bf, ok := errors.AsType[*consumer.BatchFailure](err)
	if !ok {
		t.Fatalf("error %v, want a consumer.BatchFailure", err)
	}
	if bf.Handled != 3 {
		t.Errorf("Handled = %d, want 3 (the records before the bad one)", bf.Handled)
	}
	if !consumer.IsPermanent(bf.Err) || !errors.Is(bf.Err, events.ErrMalformed) {
		t.Errorf("batch failure %v, want the bad record's permanent decoding error", bf.Err)
	}
	rows, err := db.Query(t.Context(), `SELECT transfer_id FROM decision ORDER BY decided_at, transfer_id`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uuid.UUID]bool{}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[uuid.UUID]bool{ids[0]: true, ids[1]: true, ids[2]: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decided transfers (-want +got):\n%s", diff)
	}
	var n int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM outbox_event`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d outbox rows, want 3", n)
	}
}
