package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dbs are pools on the four services' databases.
type dbs map[string]*pgxpool.Pool

// dist summarises durations.
type dist struct {
	n                  int
	p50, p90, p99, max time.Duration
}

func summarise(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return dist{n: len(s), p50: at(0.50), p90: at(0.90), p99: at(0.99), max: s[len(s)-1]}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d.Microseconds())/1000) }

// hops are the stages a transfer goes through, in order, as the rows'
// timestamps show them.
var hops = []string{
	"transfers outbox (enqueue to ack)",
	"antifraud consume (ack to decision)",
	"antifraud outbox (enqueue to ack)",
	"ledger consume (ack to settlement)",
	"ledger outbox (enqueue to ack)",
	"projection (ack to atualizada_em)",
	"notifications (ack to log row written)",
	// Each service to the next, its relay and the next consumer together:
	// true for both relays (the logical relay's published_at is its
	// settle's time, up to OUTBOX_LOGICAL_SETTLE_INTERVAL after the ack,
	// so the hops above read from it are not a hop's time for it).
	"transfers to antifraud (enqueue to decision)",
	"antifraud to ledger (enqueue to settlement)",
	"ledger to projection (enqueue to atualizada_em)",
}

// flow is what the rows of one step's transfers say.
type flow struct {
	e2e      []time.Duration // criada_em to atualizada_em, terminal transfers
	pending  int             // still PENDENTE
	hops     map[string][]time.Duration
	statuses map[string]int
}

type stamps struct{ enqueued, published time.Time }

func outboxStamps(ctx context.Context, db *pgxpool.Pool, topicLike string, ids []string) (map[string]stamps, error) {
	rows, err := db.Query(ctx, `
SELECT aggregate_id, enqueued_at, published_at FROM outbox_event
WHERE aggregate_id = ANY($1::text[]) AND topic LIKE $2 AND published_at IS NOT NULL`, ids, topicLike)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]stamps{}
	for rows.Next() {
		var id string
		var s stamps
		if err := rows.Scan(&id, &s.enqueued, &s.published); err != nil {
			return nil, err
		}
		out[id] = s
	}
	return out, rows.Err()
}

func timesByID(ctx context.Context, db *pgxpool.Pool, sql string, ids []uuid.UUID) (map[string]time.Time, error) {
	rows, err := db.Query(ctx, sql, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id uuid.UUID
		var t time.Time
		if err := rows.Scan(&id, &t); err != nil {
			return nil, err
		}
		out[id.String()] = t
	}
	return out, rows.Err()
}

// measureFlow reads the rows of the transfers ids in the four databases.
func measureFlow(ctx context.Context, d dbs, ids []uuid.UUID) (flow, error) {
	f := flow{hops: map[string][]time.Duration{}, statuses: map[string]int{}}
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	rows, err := d["transfers"].Query(ctx, `SELECT id, status, criada_em, atualizada_em FROM transferencia WHERE id = ANY($1)`, ids)
	if err != nil {
		return f, err
	}
	type tr struct {
		status           string
		created, updated time.Time
	}
	trs := map[string]tr{}
	for rows.Next() {
		var id uuid.UUID
		var t tr
		if err := rows.Scan(&id, &t.status, &t.created, &t.updated); err != nil {
			rows.Close()
			return f, err
		}
		trs[id.String()] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return f, err
	}
	tOut, err := outboxStamps(ctx, d["transfers"], "%", strs)
	if err != nil {
		return f, fmt.Errorf("transfers outbox: %w", err)
	}
	decided, err := timesByID(ctx, d["antifraud"], `SELECT transfer_id, decided_at FROM decision WHERE transfer_id = ANY($1)`, ids)
	if err != nil {
		return f, fmt.Errorf("decisions: %w", err)
	}
	aOut, err := outboxStamps(ctx, d["antifraud"], "%", strs)
	if err != nil {
		return f, fmt.Errorf("antifraud outbox: %w", err)
	}
	lOut, err := outboxStamps(ctx, d["ledger"], "%", strs)
	if err != nil {
		return f, fmt.Errorf("ledger outbox: %w", err)
	}
	notified, err := timesByID(ctx, d["notifications"], `SELECT transfer_id, updated_at FROM notification WHERE transfer_id = ANY($1)`, ids)
	if err != nil {
		return f, fmt.Errorf("notifications: %w", err)
	}
	add := func(hop string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			f.hops[hop] = append(f.hops[hop], to.Sub(from))
		}
	}
	for _, id := range strs {
		t, ok := trs[id]
		if !ok {
			continue
		}
		f.statuses[t.status]++
		if t.status == "PENDENTE" {
			f.pending++
			continue
		}
		f.e2e = append(f.e2e, t.updated.Sub(t.created))
		to, ao, lo := tOut[id], aOut[id], lOut[id]
		add(hops[0], to.enqueued, to.published)
		add(hops[1], to.published, decided[id])
		add(hops[2], ao.enqueued, ao.published)
		add(hops[3], ao.published, lo.enqueued)
		add(hops[4], lo.enqueued, lo.published)
		add(hops[5], lo.published, t.updated)
		add(hops[6], lo.published, notified[id])
		add(hops[7], to.enqueued, decided[id])
		add(hops[8], ao.enqueued, lo.enqueued)
		add(hops[9], lo.enqueued, t.updated)
	}
	return f, nil
}

// terminalBetween counts the transfers that reached a terminal status
// within [from, to].
func terminalBetween(ctx context.Context, db *pgxpool.Pool, from, to time.Time) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM transferencia WHERE status <> 'PENDENTE' AND atualizada_em BETWEEN $1 AND $2`, from, to).Scan(&n)
	return n, err
}

// window is the width of the slices a step's settled rate is also read in.
const window = 5 * time.Second

// settledWindows is the settled rate of each whole window of [from, to],
// read from the rows' atualizada_em: a step's mean hides how far the flow's
// own rate moves at a constant offered load, and an overload step's ratio
// to the plateau is only as firm as that spread.
func settledWindows(ctx context.Context, db *pgxpool.Pool, from, to time.Time) ([]float64, error) {
	rows, err := db.Query(ctx, `SELECT floor(extract(epoch FROM atualizada_em - $1) / $3)::int, count(*)
		FROM transferencia WHERE status <> 'PENDENTE' AND atualizada_em >= $1 AND atualizada_em < $2 GROUP BY 1`,
		from, to, window.Seconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[int]int{}
	for rows.Next() {
		var i, n int
		if err := rows.Scan(&i, &n); err != nil {
			return nil, err
		}
		counts[i] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return windowRates(counts, to.Sub(from)), nil
}

// windowRates is the rate of each whole window of a span of length span,
// from the count of each window by index; windows with no count settled
// nothing, and the last, partial window is left out.
func windowRates(counts map[int]int, span time.Duration) []float64 {
	rates := make([]float64, max(0, int(span/window)))
	for i := range rates {
		rates[i] = float64(counts[i]) / window.Seconds()
	}
	return rates
}

// windowLine prints a step's window rates and, against their mean, the
// lowest and the highest.
func windowLine(rates []float64) string {
	if len(rates) == 0 {
		return "no whole window"
	}
	var b strings.Builder
	low, high, sum := rates[0], rates[0], 0.0
	for _, r := range rates {
		fmt.Fprintf(&b, "%.0f ", r)
		low, high, sum = min(low, r), max(high, r), sum+r
	}
	mean := sum / float64(len(rates))
	if mean > 0 {
		fmt.Fprintf(&b, "(lowest %.2fx their mean, highest %.2fx)", low/mean, high/mean)
	}
	return strings.TrimSpace(b.String())
}

// pendingCount counts the PENDENTE transfers.
func pendingCount(ctx context.Context, db *pgxpool.Pool) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM transferencia WHERE status = 'PENDENTE'`).Scan(&n)
	return n, err
}
