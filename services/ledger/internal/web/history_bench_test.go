package web_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

// deepAccount gives account id n deposits of 1 cent, stamped one
// millisecond apart from base, as the service writes them (running
// balances, the funding account's side included), by generate_series.
// Accounts made one after the other take later bases, so that the funding
// account's stamps never go back.
func deepAccount(tb testing.TB, a *api, id string, n int, base time.Time) {
	tb.Helper()
	ctx := context.Background()
	for _, s := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO account (id, currency, holder) VALUES ($1, 'BRL', 'client-a')`, []any{id}},
		{`INSERT INTO account (id, currency, funding) VALUES ('__FUNDING__BRL', 'BRL', true) ON CONFLICT DO NOTHING`, nil},
		{`INSERT INTO posting (entry_type, entry_id, account_id, direction, amount_cents, balance_after_cents, created_at)
SELECT 'DEPOSIT', md5($1 || i)::uuid, s.account_id, s.direction, 1, s.after, $3::timestamptz + i * interval '1 ms'
FROM (SELECT balance_cents AS start FROM account WHERE id = '__FUNDING__BRL') f, generate_series(1, $2::int) i
CROSS JOIN LATERAL (VALUES (1, '__FUNDING__BRL', 'D', f.start - i), (2, $1, 'C', i)) AS s(k, account_id, direction, after)
ORDER BY i, s.k`, []any{id, n, base}},
		{`UPDATE account SET balance_cents = balance_cents + CASE WHEN funding THEN -$2::bigint ELSE $2::bigint END
WHERE id IN ($1, '__FUNDING__BRL')`, []any{id, n}},
		{`VACUUM ANALYZE posting`, nil},
	} {
		if _, err := a.db.Exec(ctx, s.q, s.args...); err != nil {
			tb.Fatalf("%s: %v", s.q, err)
		}
	}
}

// getDiscard sends GET path and reads the body to its end, failing on any
// status but 200.
func (a *api) getDiscard(tb testing.TB, path string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, a.srv.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
	}
}

// BenchmarkBalanceAt: GET /contas/{id}/saldo?em= on an account of 100,000
// postings, at an instant near its first posting, in the middle and near
// its last, against GET /contas/{id} of the same account in the same run
// (the aim: within 2x, whatever the depth). Over HTTP, in process.
func BenchmarkBalanceAt(b *testing.B) {
	const n = 100_000
	a := newAPI(b)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deepAccount(b, a, "DEEP", n, base)
	ns := map[string]float64{}
	cases := []struct {
		name, path string
	}{
		{"GET-conta", "/contas/DEEP"},
		{"saldo-depth-100", "/contas/DEEP/saldo?em=" + instant(base.Add(100*time.Millisecond))},
		{"saldo-depth-50000", "/contas/DEEP/saldo?em=" + instant(base.Add(50_000*time.Millisecond))},
		{"saldo-depth-99900", "/contas/DEEP/saldo?em=" + instant(base.Add(99_900*time.Millisecond))},
		{"saldo-now", "/contas/DEEP/saldo?em=2030-01-01T00:00:00Z"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			a.getDiscard(b, c.path) // warm: plans, connections
			b.ResetTimer()
			for b.Loop() {
				a.getDiscard(b, c.path)
			}
			ns[c.name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	for _, c := range cases[1:] {
		if ns["GET-conta"] > 0 && ns[c.name] > 0 {
			b.Logf("%s: %.2fx GET /contas/{id} (%.0f us against %.0f us)", c.name, ns[c.name]/ns["GET-conta"], ns[c.name]/1e3, ns["GET-conta"]/1e3)
		}
	}
}

// BenchmarkStatementMemory: the JSON and CSV statements of 10,000 and of
// 100,000 postings, over HTTP in process. It reports the peak of the live
// heap during a statement above the heap before it (peak-heap-B, sampled
// every millisecond), which stays flat in the statement's length when the
// postings are streamed, and what each posting allocates (B/posting,
// allocations that the garbage collector takes back as the stream goes).
func BenchmarkStatementMemory(b *testing.B) {
	a := newAPI(b)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deepAccount(b, a, "S10K", 10_000, base)
	deepAccount(b, a, "S100K", 100_000, base.Add(24*time.Hour))
	for _, c := range []struct {
		name, account string
		postings      int
	}{{"10k", "S10K", 10_000}, {"100k", "S100K", 100_000}} {
		for _, format := range []string{"json", "csv"} {
			b.Run(format+"/"+c.name, func(b *testing.B) {
				path := "/contas/" + c.account + "/extrato?desde=2025-12-31T00:00:00Z&ate=2026-01-03T00:00:00Z&formato=" + format
				b.ReportAllocs()
				var peak int64
				for b.Loop() {
					peak = max(peak, peakHeap(func() { a.getDiscard(b, path) }))
				}
				b.ReportMetric(float64(peak), "peak-heap-B")
			})
		}
	}
}

// peakHeap runs f and returns the highest live heap seen while it ran,
// less the live heap before it.
func peakHeap(f func()) int64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64()) //nolint:gosec // a heap's size fits
	}
	before := read()
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			peak.Store(max(peak.Load(), read()))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	return max(0, peak.Load()-before)
}
