package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/notifications/internal/notify"
	"github.com/paysuite/payments/services/notifications/internal/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
)

// TestBatchesFindTheirRowsByKey: the batch path's statements get their
// plans while the log is almost empty, as on a new deployment, and the
// session keeps them. Once the log has grown, a batch of one must still
// find its entry by its key, not read the whole log (a sequential scan is
// the cheapest plan for a page or two, and a plan made then stays).
func TestBatchesFindTheirRowsByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewSession(t, migrations.ForService("notifications")...) // one session, whose plans the batches reuse
	st := postgres.New(pg.Wrap(pool))
	delivered := func(int, notify.Entry) (notify.Outcome, bool, bool) {
		return notify.Outcome{Status: notify.StatusDelivered, At: time.Now()}, true, false
	}
	batch := func() {
		t.Helper()
		n := notify.Notification{EventID: uuid.New(), EventType: "TransferenciaLiquidada", TransferID: uuid.New(),
			Status: "LIQUIDADA", OccurredAt: time.Now(), Account: "CC-001", Topic: "transferencias.liquidadas"}
		entries, err := st.ClaimAll(ctx, []notify.Notification{n}, "webhook", delivered)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Status != notify.StatusDelivered {
			t.Fatalf("entries %+v, want one delivered", entries)
		}
	}
	for range 10 {
		batch()
	}
	if _, err := pool.Exec(ctx, `INSERT INTO notification (event_id, transfer_id, event_type, source_account, channel)
SELECT gen_random_uuid(), gen_random_uuid(), 'TransferenciaLiquidada', 'CC-001', 'webhook' FROM generate_series(1, 5000)`); err != nil {
		t.Fatal(err)
	}
	before := pgtest.RowsRead(t, pool, "notification")
	batch()
	// The entry is read back after its insert, and again by the update
	// that records the outcome.
	if n := pgtest.RowsRead(t, pool, "notification") - before; n > 3 {
		t.Errorf("a batch of one on a log of 5,000 entries read %d of its rows, want at most 3 (each found by its key)", n)
	}
}
