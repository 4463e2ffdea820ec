package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
)

// TestLoadFindsItsRowsByKey: Load's statements get their plans while the
// decisions are few, as on a new deployment, and the session keeps them.
// Once the table has grown, a batch of one must still find its decision
// and its history by their keys, not read every decision (a sequential
// scan is the cheapest plan for a page or two, and a plan made then stays).
func TestLoadFindsItsRowsByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewSession(t, migrations.ForService("antifraud")...) // one session, whose plans the batches reuse
	db := pg.Wrap(pool)
	st := postgres.NewStore(db, outbox.New(db))
	load := func(n int) {
		t.Helper()
		ids := make([]uuid.UUID, n)
		for i := range ids {
			ids[i] = uuid.New()
		}
		err := st.InTx(ctx, func(tx analysis.Tx) error {
			_, _, err := tx.Load(ctx, []string{"CC-001"}, ids,
				[]analysis.HistoryQuery{{Account: "CC-001", Client: "client-a", Since: time.Now().Add(-time.Hour)}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	decide := func(from, to int) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO decision (transfer_id, request_event_id, source_account, dest_account,
    amount_cents, currency, occurred_at, score, threshold, outcome, event_id, decided_at, client_id)
SELECT gen_random_uuid(), gen_random_uuid(), 'CC-' || i, 'CC-002', 100, 'BRL', now(), 10, 70, 'APPROVED',
       gen_random_uuid(), now(), 'client-a'
  FROM generate_series($1::int, $2::int) AS i`, from, to); err != nil {
			t.Fatal(err)
		}
	}
	// A few hundred decisions, analyzed: a page or two, as in the first
	// minute of a deployment.
	decide(1000, 1299)
	if _, err := pool.Exec(ctx, `ANALYZE decision`); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		load(500) // the batches of a busy minute
	}
	decide(1300, 6299)
	before := pgtest.RowsRead(t, pool, "decision")
	load(1)
	if n := pgtest.RowsRead(t, pool, "decision") - before; n > 2 {
		t.Errorf("a batch of one on 5,300 decisions read %d of them, want at most 2 (each found by its key)", n)
	}
}
