package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/test/support/pgtest"
)

func TestScrapeReadsTheRoundTripCounters(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP kafka_client_requests_total Requests.
# TYPE kafka_client_requests_total counter
kafka_client_requests_total{request="Fetch"} 120
kafka_client_requests_total{request="Produce"} 7
outbox_relay_batch_size_count 5
outbox_relay_batch_size_sum 50
outbox_relay_empty_claims_total 2
go_memstats_heap_inuse_bytes 1.2e+07
`)
	}))
	defer srv.Close()
	out := map[string]float64{"kafka Fetch": 30}
	scrape(context.Background(), srv.URL, out, true)
	want := map[string]float64{"kafka Fetch": 150, "kafka Produce": 7, "relay claims with events": 5, "relay claims finding none": 2}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
	// Another service of the same process: its relay's claims, not the
	// process's Kafka counter a second time.
	scrape(context.Background(), srv.URL, out, false)
	want = map[string]float64{"kafka Fetch": 150, "kafka Produce": 7, "relay claims with events": 10, "relay claims finding none": 4}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("scrape of a second service (-want +got):\n%s", diff)
	}
}

func TestPerSettledDividesByTheTransfersOfTheStep(t *testing.T) {
	t.Parallel()
	row := stepRow{settled: 100, elapsed: 10 * time.Second}
	if got := perSettled(2*time.Second, row); got != 2*time.Millisecond {
		t.Errorf("perSettled = %v, want 2ms (2 s over 1,000 transfers)", got)
	}
	if got := perSettled(time.Second, stepRow{}); got != 0 {
		t.Errorf("perSettled of a step that settled nothing = %v, want 0", got)
	}
}

// The idle suite's CPU, from the 1/s step, is spread over each step's
// settled transfers; the aim (1.5x the plateau step's CPU per settled
// transfer) less the low rate's share is what it leaves a transfer.
func TestSplitIdle(t *testing.T) {
	t.Parallel()
	// 0.2 cores at 1/s: 3 s of CPU over 15 s.
	idle := stepRow{offered: 1, settled: 1, elapsed: 15 * time.Second, servers: map[string]time.Duration{"postgresql": 2 * time.Second, "kafka": time.Second}}
	at := stepRow{offered: 100, settled: 100}
	top := stepRow{offered: 800, settled: 800, cpuPerSettled: 2500 * time.Microsecond}
	got, ok := splitIdle(idle, at, top)
	if !ok {
		t.Fatal("splitIdle refused three measured steps")
	}
	want := idleShare{cores: 0.2, at: 2 * time.Millisecond, left: 1750 * time.Microsecond, topOwn: 2250 * time.Microsecond}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(idleShare{}), cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("splitIdle (-want +got):\n%s", diff)
	}
	if _, ok := splitIdle(stepRow{offered: 1}, at, top); ok {
		t.Error("splitIdle of an idle step with no length: want false")
	}
	if _, ok := splitIdle(idle, stepRow{offered: 100}, top); ok {
		t.Error("splitIdle of a 100/s step that settled nothing: want false")
	}
}

func TestWarmUpWaitsForTheJIT(t *testing.T) {
	t.Parallel()
	// per is the compiler's CPU during each load in turn, the last
	// repeated: over the first 20 s, 2 s is 0.1 cores; over a 5 s slice,
	// 0.5 s is 0.1 cores and 0.05 s 0.01.
	cases := []struct {
		name    string
		first   time.Duration
		per     []time.Duration
		most    time.Duration
		took    time.Duration
		lastJIT float64
		loads   int
	}{
		{"quiet at once", 20 * time.Second, []time.Duration{200 * time.Millisecond}, 80 * time.Second, 20 * time.Second, 0.01, 1},
		{"quiet after two slices", 20 * time.Second, []time.Duration{2 * time.Second, 500 * time.Millisecond, 50 * time.Millisecond}, 80 * time.Second, 30 * time.Second, 0.01, 3},
		{"never quiet: stops at the most", 20 * time.Second, []time.Duration{2 * time.Second, time.Second}, 32 * time.Second, 30 * time.Second, 0.2, 3},
		{"no warm-up asked", 0, []time.Duration{time.Second}, 80 * time.Second, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var used time.Duration
			var loads []time.Duration
			took, last := warmUp(c.first, c.most, 5*time.Second, 0.02,
				func(d time.Duration) { used += c.per[min(len(loads), len(c.per)-1)]; loads = append(loads, d) },
				func() time.Duration { return used })
			if took != c.took || math.Abs(last-c.lastJIT) > 1e-9 || len(loads) != c.loads {
				t.Errorf("warmUp = %s, %.3f cores after %d loads %v; want %s, %.3f after %d", took, last, len(loads), loads, c.took, c.lastJIT, c.loads)
			}
		})
	}
}

// The summary sets the 1/s step's e2e p50, where each transfer travels
// alone, against both floors: the latency aim's ratio with no queue.
func TestSummaryPrintsTheLatencyAlone(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	b := &bench{
		o:         options{relay: "polling", modes: []string{"four-processes"}},
		out:       &out,
		floorP50:  time.Millisecond,
		commitP50: 300 * time.Microsecond,
		rows: map[string][]stepRow{"four-processes": {
			{offered: 1, settled: 1, e2e: dist{n: 15, p50: 12 * time.Millisecond}},
			{offered: 100, settled: 100, e2e: dist{n: 1500, p50: 29 * time.Millisecond}},
		}},
		sustained: map[string]float64{"four-processes": 100},
		plateau:   map[string]float64{"four-processes": 100},
	}
	b.summary()
	// 12 ms over 3 x 1 ms, and over 3 x 1 ms + 3 x 0.3 ms.
	want := "four-processes: e2e at 1/s (the machine idle but for it: no queue, no batch): p50 12 ms = 4.0 x the three-hop floor, 3.1 x the durable floor"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, out.String())
	}
	b.rows["four-processes"] = b.rows["four-processes"][1:]
	out.Reset()
	b.summary()
	if strings.Contains(out.String(), "e2e at 1/s") {
		t.Errorf("summary of a run without a 1/s step prints a 1/s line:\n%s", out.String())
	}
}

// The server's counters grow with a checkpoint, a commit and the
// full-page images of an index build (whole pages whatever
// full_page_writes); its WAL flushes with a commit when fsync is on; a
// database whose tables autovacuum never ran on counts 0.
func TestServerCounters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `CREATE TABLE page (id int PRIMARY KEY, n int NOT NULL); INSERT INTO page VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	names := []string{"postgresql commits", "postgresql full-page images", "postgresql checkpoints"}
	var fsync string
	if err := conn.QueryRow(ctx, `SHOW fsync`).Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync == "on" {
		names = append(names, "postgresql WAL flushes (fsync)")
	}
	before := map[string]float64{}
	serverCounters(ctx, db, before)
	// A backend reports its statistics at most once a second unless told
	// to at its next idle moment.
	if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE page SET n = n + 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE INDEX ON page (n)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	after := map[string]float64{}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		serverCounters(ctx, db, after)
		grown := 0
		for _, n := range names {
			if after[n] > before[n] {
				grown++
			}
		}
		if grown == len(names) || time.Now().After(deadline) {
			break
		}
	}
	for _, n := range names {
		if after[n] <= before[n] {
			t.Errorf("%s: %v before, %v after a checkpoint, a commit and an index build", n, before[n], after[n])
		}
	}
	n, err := autovacuums(ctx, db)
	if err != nil || n != 0 {
		t.Errorf("autovacuums = %v, %v; want 0 on a table autovacuum has not run on", n, err)
	}
}
