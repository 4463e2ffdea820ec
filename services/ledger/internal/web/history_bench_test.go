package web_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
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
// (the aim: within 2x, whatever the depth), run before and after them.
// Over HTTP, in process.
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
		{"GET-conta-again", "/contas/DEEP"},
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
	// The baseline runs first and last; their mean is what each depth is
	// set against, so that a drift of the shared machine's load over the
	// run weighs on both sides.
	byID := (ns["GET-conta"] + ns["GET-conta-again"]) / 2
	for _, c := range cases[1 : len(cases)-1] {
		if byID > 0 && ns[c.name] > 0 {
			b.Logf("%s: %.2fx GET /contas/{id} (%.0f us against %.0f us)", c.name, ns[c.name]/byID, ns[c.name]/1e3, byID/1e3)
		}
	}
}

// BenchmarkStatementMemory: the JSON and CSV statements of 10,000 and of
// 100,000 postings, over HTTP in process. While it reads a statement, the
// client stops after every 256 KiB of it, collects the garbage and reads
// the live heap (the server's and its own: one process). It reports how
// much the live heap grew from the first such reading (the request under
// way: its connections acquired, its first postings sent) to the highest
// later one (grown-live-B): a statement held in memory grows it with its
// length, a streamed one not at all. B/op, which grows with the length,
// is what the postings allocate and the collector takes back as the
// stream goes.
func BenchmarkStatementMemory(b *testing.B) {
	a := newAPI(b)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deepAccount(b, a, "S10K", 10_000, base)
	deepAccount(b, a, "S100K", 100_000, base.Add(24*time.Hour))
	for _, c := range []struct {
		name, account string
	}{{"10k", "S10K"}, {"100k", "S100K"}} {
		for _, format := range []string{"json", "csv"} {
			b.Run(format+"/"+c.name, func(b *testing.B) {
				path := "/contas/" + c.account + "/extrato?desde=2025-12-31T00:00:00Z&ate=2026-01-03T00:00:00Z&formato=" + format
				a.getDiscard(b, path) // warm: the pool's connections are opened (about 1.5 MB each), plans made
				b.ReportAllocs()
				b.ResetTimer()
				var peak, size int64
				for b.Loop() {
					p, n := a.peakLive(b, path)
					peak, size = max(peak, p), n
				}
				b.ReportMetric(float64(peak), "grown-live-B")
				b.ReportMetric(float64(size), "body-B")
			})
		}
	}
}

// peakLive reads GET path to its end, collecting the garbage and reading
// the live heap every 256 KiB, and returns the most the live heap grew
// after the first reading, and the body's size.
func (a *api) peakLive(tb testing.TB, path string) (grown, size int64) {
	live := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc) //nolint:gosec // a heap's size fits
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, a.srv.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	buf := make([]byte, 32<<10)
	first, next := int64(-1), int64(256<<10)
	for {
		n, err := res.Body.Read(buf)
		if size += int64(n); size >= next {
			if l := live(); first < 0 {
				first = l
			} else {
				grown = max(grown, l-first)
			}
			next += 256 << 10
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	if res.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	return grown, size
}
