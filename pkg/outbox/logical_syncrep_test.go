package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/poll"
)

// With synchronous_standby_names = '*' every replication connection is a
// synchronous standby candidate, the logical relay's included, and the
// server picks the candidate of the lowest walsender slot. Were the relay
// picked, no commit of an event would finish: the commit waits for the
// relay's confirmation, which waits for the event's publication, which
// waits for the commit to be visible. The relay here takes the lowest
// slot (it connects while the standby is stopped), so the server would
// pick it; it must confirm nothing while it is a candidate (which keeps it
// out of the choice), publish meanwhile, raise its gauge, and confirm
// again once the standbys are named.
//
// Not parallel: it starts and clones a server of its own, which would
// slow the timing-sensitive tests of the package running beside it.
func TestLogicalRelayIsNeverTheSynchronousStandby(t *testing.T) {
	pair := cluster.StartPair(t, "", cluster.Sync, cluster.LogicalOpts...)
	pair.CreateDB("app")
	ctx := context.Background()
	db := openPlatformDB(ctx, t, pair.Primary().DSN("app", ""), pair.Primary().DSN("app", "syncrep-test"))
	ob := outbox.New(db)
	// enqueue commits one event within 15 s (a commit waiting longer waits
	// for a standby that will not confirm) and returns the commit's LSN.
	enqueue := func(id uuid.UUID) (pglogrepl.LSN, error) {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		body, _ := json.Marshal(payload{Key: "k"})
		var lsn string
		err := db.InTx(cctx, func(tx pgx.Tx) error {
			if err := ob.Enqueue(cctx, tx, events.Message{ID: id, AggregateType: "widget", AggregateID: id.String(),
				Topic: "t", Key: "k", Type: "WidgetCreated", Payload: body}); err != nil {
				return err
			}
			return tx.QueryRow(cctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn)
		})
		if err != nil {
			return 0, err
		}
		return pglogrepl.ParseLSN(lsn)
	}
	slot := dropSlotOf(t, db)
	confirmed := func() pglogrepl.LSN {
		var s string
		if err := db.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s); err != nil {
			t.Fatal(err)
		}
		lsn, _ := pglogrepl.ParseLSN(s)
		return lsn
	}
	walsenders := func() string {
		rows, err := db.Query(ctx, `SELECT application_name, COALESCE(sync_state, ''), COALESCE(sync_priority, -1) FROM pg_stat_replication ORDER BY pid`)
		if err != nil {
			return err.Error()
		}
		var out []string
		for rows.Next() {
			var app, state string
			var prio int
			if err := rows.Scan(&app, &state, &prio); err != nil {
				return err.Error()
			}
			out = append(out, fmt.Sprintf("%s %s (priority %d)", app, state, prio))
		}
		if err := rows.Err(); err != nil {
			return err.Error()
		}
		return strings.Join(out, ", ")
	}

	// The slot made and drained while the standby is named and streaming:
	// setting up commits, which must not wait for a stopped standby.
	pub := sentPublisher{sent: make(chan string, 16)}
	first := outbox.NewLogicalRelay(ob, pub, logicalConfig(), fastRelay("logical"), testLogger(t), nil, nil)
	task := background.Go(t, "first logical relay", first.Run)
	poll.True(t, 30*time.Second, "the relay streams", first.Active)
	id := uuid.New()
	if _, err := enqueue(id); err != nil {
		t.Fatal(err)
	}
	waitSent(t, pub, id)
	task.Stop(t)

	// The relay takes the lowest walsender slot: it streams again while the
	// standby is stopped, and the standby comes back after it.
	pair.StopStandby()
	poll.Until(t, 30*time.Second, "no walsender left", func() (bool, string) {
		s := walsenders()
		return s == "", s
	})
	pair.SetSyncStandbyNames("*")
	t.Cleanup(func() { pair.SetSyncStandbyNames(cluster.SyncStandbyNames) }) // before db.Close: no commit left waiting
	lm := outbox.NewLogicalMetrics(nil)
	r := outbox.NewLogicalRelay(ob, pub, logicalConfig(), fastRelay("logical"), testLogger(t), nil, lm)
	background.Go(t, "logical relay", r.Run)
	poll.True(t, 30*time.Second, "the relay streams", r.Active)
	poll.Until(t, 30*time.Second, "the relay's walsender listed", func() (bool, string) {
		s := walsenders()
		return s != "", s
	})
	pair.StartStandby()
	poll.Until(t, time.Minute, "the standby streams", func() (bool, string) {
		s := walsenders()
		return strings.Contains(s, "pg-2 sync") || strings.Contains(s, "pg-2 potential"), s
	})
	poll.Until(t, 10*time.Second, "outbox_logical_synchronous_candidate = 1 with '*'", func() (bool, string) {
		return gaugeValue(lm.SyncCandidate) == 1, walsenders()
	})

	before := confirmed()
	waiting := uuid.New()
	lsn, err := enqueue(waiting)
	if err != nil {
		t.Fatalf("the commit of an event did not finish (%v); walsenders: %s", err, walsenders())
	}
	waitSent(t, pub, waiting)
	poll.Never(t, 2*time.Second, "the relay confirms, or is the synchronous standby, while a candidate", func() (bool, string) {
		c, s := confirmed(), walsenders()
		return c != before || !strings.Contains(s, "pg-2 sync"), fmt.Sprintf("confirmed %s, was %s; walsenders: %s", c, before, s)
	})

	// Named standbys: the relay's connection is no candidate and confirms
	// past the event it published.
	pair.SetSyncStandbyNames(cluster.SyncStandbyNames)
	poll.Until(t, 10*time.Second, "the relay confirms past the event", func() (bool, string) {
		c := confirmed()
		return c >= lsn, fmt.Sprintf("confirmed %s, event at %s; walsenders: %s", c, lsn, walsenders())
	})
	if got := gaugeValue(lm.SyncCandidate); got != 0 {
		t.Errorf("outbox_logical_synchronous_candidate = %v with the standbys named, want 0", got)
	}
	if s := walsenders(); !strings.Contains(s, slot+" async (priority 0)") {
		t.Errorf("walsenders %s: want the relay's (%s) async", s, slot)
	}
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}
