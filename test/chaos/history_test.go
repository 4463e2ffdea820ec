//go:build chaos

package chaos

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/chaos/history"
)

var (
	flagSnapshotEvery = flag.Duration("chaos.snapshot-every", 5*time.Second, "how often a balance snapshot is taken during the load")
	flagReads         = flag.Int("chaos.reads", 10, "GETs of accepted transfers a second during the load")
)

// historyFile is the history's name in the logs folder.
const historyFile = "history.jsonl"

// openHistory starts recording the run's history next to the logs.
func (s *suite) openHistory(logDir string) {
	s.t.Helper()
	s.historyPath = filepath.Join(logDir, historyFile)
	rec, err := history.Create(s.historyPath)
	if err != nil {
		s.t.Fatal(err)
	}
	s.rec = rec
	s.t.Cleanup(func() { _ = rec.Close() })
	// What the mix claims, for the checker to hold the run to.
	if *flagRefunds > 0 {
		rec.Mix(history.MixRefunds)
	}
	if *flagStatements {
		rec.Mix(history.MixStatements)
	}
}

// snapshots takes a balance snapshot every flagSnapshotEvery (none if 0)
// until stop is closed, faults or not: a snapshot that fails (the ledger's database
// down) is not recorded and counted in failed.
func (s *suite) snapshots(ctx context.Context, stop <-chan struct{}) (taken, failed int) {
	if *flagSnapshotEvery <= 0 {
		return 0, 0
	}
	tick := time.NewTicker(*flagSnapshotEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return taken, failed
		case <-ctx.Done():
			return taken, failed
		case <-tick.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := s.snapshot(sctx); err != nil {
			failed++
		} else {
			taken++
		}
		cancel()
	}
}

// snapshot reads every balance (and its reserved amount), every entry's
// postings and every reservation in one REPEATABLE READ transaction on
// the ledger's database, and records it; with refunds in the mix, each
// refund entry's transfer (the ledger's refund table), and with
// flagStatements every posting row with its running balance
// (posting.balance_after_cents).
func (s *suite) snapshot(ctx context.Context) error {
	invoked := time.Now()
	var snap history.Snapshot
	err := pgx.BeginTxFunc(ctx, s.ledger, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, currency, funding, balance_cents, reserved_cents FROM account`)
		if err != nil {
			return err
		}
		snap.Balances, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (history.Balance, error) {
			var b history.Balance
			return b, r.Scan(&b.Account, &b.Currency, &b.Funding, &b.Cents, &b.ReservedCents)
		})
		if err != nil {
			return err
		}
		// Every reservation, open or released, its state named as the
		// transfer's status.
		rows, err = tx.Query(ctx, `
SELECT transfer_id::text, source_account, amount_cents,
       CASE state WHEN 'open' THEN 'RESERVADA' WHEN 'captured' THEN 'LIQUIDADA' WHEN 'cancelled' THEN 'CANCELADA'
                  WHEN 'expired' THEN 'EXPIRADA' ELSE state END,
       coalesce(captured_cents, 0)
  FROM reservation`)
		if err != nil {
			return err
		}
		snap.Holds, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (history.Hold, error) {
			var h history.Hold
			return h, r.Scan(&h.TransferID, &h.Account, &h.AmountCents, &h.State, &h.CapturedCents)
		})
		if err != nil {
			return err
		}
		// One row per entry: its debit and its credit (the ledger keeps at
		// most one of each: the sums and the count of rows show an entry
		// posted twice), for the checker's per-account model.
		rows, err = tx.Query(ctx, `
SELECT entry_type, entry_id::text,
       coalesce(max(account_id) FILTER (WHERE direction = 'D'), ''), coalesce(sum(amount_cents) FILTER (WHERE direction = 'D'), 0),
       coalesce(max(account_id) FILTER (WHERE direction = 'C'), ''), coalesce(sum(amount_cents) FILTER (WHERE direction = 'C'), 0),
       count(*)
  FROM posting GROUP BY entry_type, entry_id`)
		if err != nil {
			return err
		}
		snap.Entries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (history.Entry, error) {
			var e history.Entry
			return e, r.Scan(&e.Type, &e.ID, &e.Debit, &e.DebitCents, &e.Credit, &e.CreditCents, &e.Postings)
		})
		if err != nil {
			return err
		}
		if err := snapshotRefunds(ctx, tx, &snap); err != nil {
			return err
		}
		return snapshotPostings(ctx, tx, &snap)
	})
	if err != nil {
		return err
	}
	s.rec.Snapshot(invoked, snap)
	return nil
}

// snapshotRefunds names, with refunds in the mix, the transfer of each
// refund entry (entry_type REFUND, entry_id the refund's id) from the
// ledger's refund table.
func snapshotRefunds(ctx context.Context, tx pgx.Tx, snap *history.Snapshot) error {
	if *flagRefunds <= 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT refund_id::text, transfer_id::text FROM refund`)
	if err != nil {
		return err
	}
	of := map[string]string{}
	var id, transfer string
	if _, err := pgx.ForEachRow(rows, []any{&id, &transfer}, func() error { of[id] = transfer; return nil }); err != nil {
		return err
	}
	for i, e := range snap.Entries {
		if e.Type == history.EntryRefund {
			snap.Entries[i].TransferID = of[e.ID]
		}
	}
	return nil
}

// snapshotPostings reads, with flagStatements, every posting row with the
// running balance the ledger wrote on it, for the checker's
// running-balance kind.
func snapshotPostings(ctx context.Context, tx pgx.Tx, snap *history.Snapshot) error {
	if !*flagStatements {
		return nil
	}
	rows, err := tx.Query(ctx, `
SELECT account_id, id, entry_id::text, CASE direction WHEN 'C' THEN amount_cents ELSE -amount_cents END, balance_after_cents
  FROM posting`)
	if err != nil {
		return err
	}
	snap.Postings, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (history.Posting, error) {
		var p history.Posting
		return p, r.Scan(&p.Account, &p.Seq, &p.Entry, &p.Cents, &p.After)
	})
	return err
}

// recordRecords records the rows each outbox marked published on the
// main topics (and, with holds in the mix, reservada and cancelada, with
// a capture's amount and a cancellation's motivo), and what each consumer group of those topics consumed: the
// records of the topic below the group's committed offset.
func (s *suite) recordRecords(ctx context.Context, antifraud *pgxpool.Pool) error {
	main := s.recordedTopics()
	// The ledger locks the account and antifraud handles a partition one
	// record at a time: their events of one key are serialised, so their
	// outbox order is theirs to keep. The transfers service takes
	// concurrent POSTs of one account: its events have no order.
	for _, src := range []struct {
		name    string
		db      *pgxpool.Pool
		ordered bool
	}{{"transfers", s.transfer, false}, {"antifraud", antifraud, true}, {"ledger", s.ledger, true}} {
		rows, err := src.db.Query(ctx, `
SELECT id::text, seq, topic, key, event_type, coalesce(payload->>'transferenciaId', ''),
       CASE WHEN event_type IN ($2, $3) THEN coalesce((payload->>'valorEmCentavos')::bigint, 0) ELSE 0 END,
       coalesce(payload->>'motivo', ''), coalesce(payload->>'estornoId', '')
  FROM outbox_event WHERE status = 'PUBLISHED' AND topic = ANY($1) ORDER BY seq`, main, events.TypeSettled, events.TypeRefundSettled)
		if err != nil {
			return fmt.Errorf("published rows of %s: %w", src.name, err)
		}
		recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (history.Record, error) {
			rec := history.Record{Source: src.name, Ordered: src.ordered}
			return rec, r.Scan(&rec.EventID, &rec.Seq, &rec.Topic, &rec.Key, &rec.EventType, &rec.TransferID, &rec.AmountCents, &rec.Reason,
				&rec.RefundID)
		})
		if err != nil {
			return fmt.Errorf("published rows of %s: %w", src.name, err)
		}
		for _, rec := range recs {
			s.rec.Published(rec)
		}
	}
	readers := map[string][]string{} // topic -> groups
	for group, topics := range s.groups() {
		for _, t := range topics {
			readers[t] = append(readers[t], group)
		}
	}
	// The groups named for each main topic: every record published on it
	// must be among each one's consumed records, whatever the history
	// shows consuming.
	for _, topic := range main {
		sort.Strings(readers[topic])
		if len(readers[topic]) == 0 {
			return fmt.Errorf("no consumer group named for %s", topic)
		}
		for _, g := range readers[topic] {
			s.rec.Subscribed(g, topic)
		}
	}
	for _, topic := range main {
		msgs, err := readTopic(ctx, s.kc, s.kafka.Addr(1), topic)
		if err != nil {
			return fmt.Errorf("read %s: %w", topic, err)
		}
		groups := readers[topic]
		sort.Strings(groups)
		for _, group := range groups {
			committed, err := committedOffsets(ctx, s.kc, group, topic)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				if m.Offset >= committed[m.Partition] {
					continue
				}
				s.rec.Consumed(history.Record{Topic: topic, Partition: m.Partition, Offset: m.Offset, Key: string(m.Key),
					EventID: header(m, events.HeaderEventID), EventType: header(m, events.HeaderEventType), Group: group})
			}
		}
	}
	return nil
}

func header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// checkHistory completes the history and runs the checker on it
// (judgeHistory), and fails the test on any anomaly.
func (s *suite) checkHistory(ctx context.Context, requests map[string]transferReq, snapsTaken, snapsFailed int) {
	s.t.Helper()
	rep, _, err := s.judgeHistory(ctx, requests, snapsTaken, snapsFailed)
	if err != nil {
		s.errorf("history: %v", err)
	}
	rest := s.expectInjected(rep.Anomalies)
	if len(rest) > 0 {
		s.errorf("history: %d anomalies (see the table above)", len(rest))
	}
}

// judgeHistory completes the history (a read of every transfer sent, a
// last snapshot, the records, the faults), runs the checker on the file,
// prints its table and returns its report and the history read back.
func (s *suite) judgeHistory(ctx context.Context, requests map[string]transferReq, snapsTaken, snapsFailed int) (history.Report, history.History, error) {
	t := s.t
	t.Helper()
	keys := make([]string, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if unread := s.load.readAll(ctx, keys); unread > 0 {
		s.errorf("history: %d transfers could not be read at the end", unread)
	}
	// A refund not read terminal is the checker's (refund-status): an
	// asynchronous failover's lost commits leave some so.
	if unread := s.load.readAllRefunds(ctx); unread > 0 {
		t.Logf("history: %d refunds not read LIQUIDADO or REJEITADO at the end", unread)
	}
	s.logRefunds()
	if err := s.snapshot(ctx); err != nil {
		s.errorf("history: the last snapshot: %v", err)
	}
	if *flagStatements {
		s.readStatements(ctx)
	}
	antifraud := s.pool(s.dsn("antifraud", "chaos-test"))
	if err := s.recordRecords(ctx, antifraud); err != nil {
		t.Fatalf("history: %v", err)
	}
	for _, f := range s.faults {
		end := f.restored
		if end.IsZero() {
			end = f.at
		}
		s.rec.Crash(f.at, end, history.Crash{Name: f.name, InterruptsWebhooks: f.hitsNotifications, Expect: s.expectations(f, end)})
	}
	if err := s.rec.Close(); err != nil {
		t.Fatalf("history: write %s: %v", s.historyPath, err)
	}
	h, err := history.ReadFile(s.historyPath)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	rep, err := history.Check(h)
	t.Logf("history checker (%s; snapshots during the load: %d taken, %d failed with the ledger's database down):\n%s",
		s.historyPath, snapsTaken, snapsFailed, strings.TrimRight(rep.Table(), "\n"))
	return rep, h, err
}

// recordedTopics are the topics whose records the history judges: the
// four of the immediate flow and, with holds in the mix, the ledger's two
// hold results (reservada, cancelada), with refunds the three refund
// topics. The command topics (captura, cancelamento) are the ledger's
// input, judged by its results.
func (s *suite) recordedTopics() []string {
	out := []string{s.topics.Requested, s.topics.Analysed, s.topics.Settled, s.topics.Rejected}
	if *flagHolds > 0 {
		out = append(out, s.topics.Reserved, s.topics.Cancelled)
	}
	return append(out, s.refundTopics()...)
}
