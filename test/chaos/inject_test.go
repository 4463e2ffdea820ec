//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/chaos/history"
	"github.com/paysuite/payments/test/support/poll"
)

var flagInject = flag.String("chaos.inject", injectStaleRead+","+injectReleasedTwice+","+injectRefundStatus,
	"TestChaos: anomalies injected into the live run (comma-separated) that the history checker must report as exactly their kinds, or the test fails: "+
		injectStaleRead+" (a settled transfer set back to PENDENTE for two seconds while reads target it), "+
		injectReleasedTwice+" (after the load, a captured hold released again: a TransferenciaCancelada written to the ledger's outbox; needs -chaos.holds > 0), "+
		injectRefundStatus+" (after the load, a settled refund rejected too: an EstornoRejeitado written to the ledger's outbox; needs -chaos.refunds > 0), or none")

const (
	injectStaleRead     = "stale-read"
	injectReleasedTwice = "released-twice"
	injectRefundStatus  = "refund-status"
)

// injections returns the anomalies -chaos.inject names.
func (s *suite) injections() map[string]bool {
	s.t.Helper()
	out := map[string]bool{}
	for _, n := range strings.Split(*flagInject, ",") {
		switch n = strings.TrimSpace(n); n {
		case "none", "":
		case injectStaleRead, injectReleasedTwice, injectRefundStatus:
			out[n] = true
		default:
			s.t.Fatalf("-chaos.inject=%q: want a list of %s, %s, %s, or none", *flagInject, injectStaleRead, injectReleasedTwice, injectRefundStatus)
		}
	}
	if out[injectReleasedTwice] && *flagHolds <= 0 {
		s.t.Fatalf("-chaos.inject=%s needs holds in the load (-chaos.holds > 0)", injectReleasedTwice)
	}
	if out[injectRefundStatus] && *flagRefunds <= 0 {
		s.t.Fatalf("-chaos.inject=%s needs refunds in the load (-chaos.refunds > 0)", injectRefundStatus)
	}
	return out
}

// expectations are what a fault's window must show in the history, each
// where the fault makes it possible: a snapshot if the window spans a
// snapshot period and the ledger's database answers, a read answered if
// the transfers database does, a POST of unknown outcome if a transfers
// instance or its database is down, a POST in flight at its start if it
// cuts into writes.
func (s *suite) expectations(f *fault, end time.Time) history.Expect {
	window := end.Sub(f.at)
	return history.Expect{
		Snapshots:      !f.noSnapshots && *flagSnapshotEvery > 0 && window >= *flagSnapshotEvery+time.Second,
		Reads:          !f.noReads && *flagReads > 0 && window >= time.Second,
		UnknownPosts:   f.transfersDown,
		WritesInFlight: f.cutsWrites,
	}
}

// inject injects the anomaly -chaos.inject names into the live run and
// remembers it: expectInjected then wants it reported as exactly that.
func (s *suite) inject() {
	s.t.Helper()
	if s.injections()[injectStaleRead] {
		s.injectStaleRead()
	}
}

// injectAfterLoad injects the anomalies -chaos.inject names that need the
// load's holds released: it runs once the stores were checked, before the
// history is completed and judged.
func (s *suite) injectAfterLoad() {
	s.t.Helper()
	if s.injections()[injectReleasedTwice] {
		s.injectReleasedTwice()
	}
	if s.injections()[injectRefundStatus] {
		s.injectRefundRejected()
	}
}

// injectReleasedTwice releases a captured hold a second time, as a broken
// ledger would: it writes a TransferenciaCancelada (motivo
// CANCELADA_PELO_CLIENTE, its derived event id, so consumers take it as
// the ledger's) into the ledger's outbox for a hold whose reservation was
// captured, preferring one the load raced (a cancellation was also sent),
// and waits for the relay to publish it and every group to consume it.
// The checker must report exactly one released-twice on that transfer:
// its TransferenciaLiquidada and this record. It runs after the stores'
// checks, which would see the second closing event too.
func (s *suite) injectReleasedTwice() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holds := s.load.holdKeys()
	keys := make([]string, 0, len(holds))
	for k := range holds {
		keys = append(keys, k)
	}
	rows, err := s.ledger.Query(ctx, `SELECT transfer_id, source_account FROM reservation WHERE state = 'captured' AND transfer_id::text = ANY($1)`, keys)
	if err != nil {
		s.t.Fatalf("inject: captured holds: %v", err)
	}
	var id uuid.UUID
	var source string
	for rows.Next() {
		var tid uuid.UUID
		var src string
		if err := rows.Scan(&tid, &src); err != nil {
			s.t.Fatalf("inject: captured holds: %v", err)
		}
		if id == uuid.Nil || holds[tid.String()].fate == fateRace {
			id, source = tid, src
		}
	}
	if err := rows.Err(); err != nil {
		s.t.Fatalf("inject: captured holds: %v", err)
	}
	if id == uuid.Nil {
		s.t.Fatal("inject: no captured hold to release twice")
	}
	now := time.Now().UTC()
	ev := events.Cancelled{EventID: events.DerivedID(events.KindCancelled, id), TransferID: id, Reason: events.ReasonCancelledByClient, OccurredAt: now}
	s.publishAsLedger(ctx, "the second release of "+id.String(), ev.EventID, "transfer", id, s.topics.Cancelled, source, events.TypeCancelled, ev)
	s.injected = append(s.injected, history.Anomaly{Kind: history.ReleasedTwice, About: id.String()})
	s.t.Logf("inject: captured hold %s released again (TransferenciaCancelada %s); the checker must report one %s on it",
		id, ev.EventID, history.ReleasedTwice)
}

// publishAsLedger writes event ev (its id, type typ, about aggregate id
// of aggType) into the ledger's outbox for topic under key, as the ledger
// itself would, and waits for the relay to publish it and every group to
// consume it; what names the injection in failures.
func (s *suite) publishAsLedger(ctx context.Context, what string, id uuid.UUID, aggType string, aggregate uuid.UUID, topic, key, typ string, ev any) {
	s.t.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.ledger.Exec(ctx, `
INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, occurred_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, id, aggType, aggregate.String(), topic, key, typ, payload, time.Now().UTC()); err != nil {
		s.t.Fatalf("inject: %s: %v", what, err)
	}
	var status string
	if !poll.Wait(time.Minute, 100*time.Millisecond, func() bool {
		err = s.ledger.QueryRow(ctx, `SELECT status FROM outbox_event WHERE id = $1`, id).Scan(&status)
		return err == nil && status == "PUBLISHED"
	}) {
		s.t.Fatalf("inject: %s not published within 1m (status %q, err %v)", what, status, err)
	}
	s.awaitLag(time.Minute)
}

// injectStaleRead sets a transfer the load settled back to PENDENTE in
// the transfers database for two seconds, reads it (recorded in the
// history) before, during and after, and restores it. The checker must
// report exactly one stale-read on that transfer: a read of LIQUIDADA
// followed by a read of PENDENTE.
func (s *suite) injectStaleRead() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var id string
	var updated time.Time
	var holder *string // titular_destino: only a LIQUIDADA transfer has one
	if !poll.Wait(30*time.Second, 200*time.Millisecond, func() bool {
		_, accepted, _ := s.load.snapshot()
		holds, refunds := s.load.holdKeys(), s.load.refundKeys()
		keys := make([]string, 0, len(accepted))
		for k := range accepted {
			// An immediate transfer (a hold's statuses are judged apart)
			// that the load does not refund (a refund of it would meet the
			// injected PENDENTE).
			if _, hold := holds[k]; !hold && !refunds[k] {
				keys = append(keys, k)
			}
		}
		err := s.transfer.QueryRow(ctx, `SELECT id::text, atualizada_em, titular_destino FROM transferencia
 WHERE status = 'LIQUIDADA' AND id::text = ANY($1) ORDER BY atualizada_em LIMIT 1`, keys).Scan(&id, &updated, &holder)
		return err == nil
	}) {
		s.t.Fatal("inject: no settled transfer within 30s")
	}
	read := func(i int, want string) {
		o, a := s.load.get(ctx, s.load.urls[i%len(s.load.urls)], id)
		if o != history.OK || a.TransferStatus != want {
			s.t.Fatalf("inject: read of %s: %s %+v, want %s", id, o, a, want)
		}
	}
	read(0, history.StatusSettled)
	set := func(status string, at time.Time, holder *string) {
		tag, err := s.transfer.Exec(ctx, `UPDATE transferencia SET status = $2, atualizada_em = $3, titular_destino = $4
 WHERE id::text = $1`, id, status, at, holder)
		if err != nil || tag.RowsAffected() != 1 {
			s.t.Fatalf("inject: set %s %s: %v (%d rows)", id, status, err, tag.RowsAffected())
		}
	}
	set(history.StatusPending, updated, nil)
	for i := range 4 {
		read(i, history.StatusPending)
		time.Sleep(500 * time.Millisecond) // reads spread over the two seconds, not a wait for a condition
	}
	set(history.StatusSettled, updated, holder)
	read(1, history.StatusSettled)
	s.injected = append(s.injected, history.Anomaly{Kind: history.StaleRead, About: id})
	s.t.Logf("inject: transfer %s set back to PENDENTE for 2s and read; the checker must report one %s on it", id, history.StaleRead)
}

// expectInjected takes the injected anomalies out of the checker's
// anomalies: each must be there, exactly its kind on exactly its
// transfer, or the test fails. It returns the anomalies left, which fail
// the test.
func (s *suite) expectInjected(anomalies []history.Anomaly) []history.Anomaly {
	s.t.Helper()
	rest := append([]history.Anomaly(nil), anomalies...)
	for _, want := range s.injected {
		found := -1
		for i, a := range rest {
			if a.Kind == want.Kind && a.About == want.About {
				found = i
				break
			}
		}
		if found < 0 {
			s.errorf("history: the injected %s on %s was not reported: the checker missed it", want.Kind, want.About)
			continue
		}
		s.t.Logf("history: the injected anomaly was reported as expected: %s", rest[found])
		rest = append(rest[:found], rest[found+1:]...)
	}
	for _, a := range rest {
		for _, want := range s.injected {
			if a.About == want.About {
				s.errorf("history: the injected anomaly on %s was also reported as %s", want.About, fmt.Sprint(a))
			}
		}
	}
	return rest
}
