package main

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDBURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://u:p@127.0.0.1:55432/postgres?sslmode=disable", "postgres://u:p@127.0.0.1:55432/payments_ledger?sslmode=disable"},
		{"postgres://u@h:5432", "postgres://u@h:5432/payments_ledger"},
		{"postgresql://h/db", "postgresql://h/payments_ledger"},
	}
	for _, tt := range tests {
		if got := dbURL(tt.in, "payments_ledger"); got != tt.want {
			t.Errorf("dbURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSummarise(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarise(ds)
	want := dist{n: 100, p50: 51 * time.Millisecond, p90: 91 * time.Millisecond, p99: 100 * time.Millisecond, max: 100 * time.Millisecond}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(dist{})); diff != "" {
		t.Errorf("summarise (-want +got):\n%s", diff)
	}
	if got := summarise(nil); got != (dist{}) {
		t.Errorf("summarise(nil) = %+v", got)
	}
}

// An overload step's load takes the generator's extra cores and the shed
// answers' from the cores the flow used at the plateau's step; the bound is
// what is left of those over all of them.
func TestLoadShare(t *testing.T) {
	t.Parallel()
	sec := 10 * time.Second
	top := stepRow{elapsed: sec, cpu: 18 * time.Second, generator: 1 * time.Second} // the flow 1.8 cores, the generator 0.1
	r := stepRow{elapsed: sec, generator: 3 * time.Second, shed: 30000}             // 0.3 cores; 3,000 shed/s
	got, ok := loadShare(top, r, 50*time.Microsecond)                               // 0.15 cores of shed answers
	want := share{generator: 0.2, door: 0.15, flow: 1.8, bound: 1.45 / 1.8}
	if !ok || !cmp.Equal(got, want, cmp.AllowUnexported(share{}), cmpopts.EquateApprox(0, 1e-9)) {
		t.Errorf("loadShare = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := loadShare(top, r, 0); ok {
		t.Error("no shed CPU measured: want no share")
	}
	if _, ok := loadShare(stepRow{}, r, time.Millisecond); ok {
		t.Error("no plateau step: want no share")
	}
}

// A bound the generator cannot honour is refused before anything starts.
func TestRunRefusesBadBounds(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-max-conns", "-1"}, {"-max-in-flight", "0"}, {"-warmup", "-1s"}, {"-warmup-max", "-1s"}} {
		err := run(t.Context(), args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("run %v: %v, want an error naming %s", args, err, args[0])
		}
	}
}

// A step's own CPU per settled transfer leaves out the door's shed answers,
// in both steps, and its counters are compared per settled transfer.
func TestCompareCost(t *testing.T) {
	t.Parallel()
	sec := 10 * time.Second
	work := func(commits, syncs, fetches, produces float64) map[string]float64 {
		return map[string]float64{"postgresql commits": commits, "postgresql WAL flushes (fsync)": syncs, "kafka Fetch": fetches, "kafka Produce": produces}
	}
	// 7,000 settled on 18 s of CPU, 1 s of it answering 10,000 shed POSTs: 2.43 ms each.
	top := stepRow{elapsed: sec, settled: 700, cpu: 18 * time.Second, shed: 10000, work: work(14000, 3500, 1000, 1000)}
	// 5,000 settled on 17 s of CPU, 3 s of it answering 30,000 shed POSTs: 2.8 ms each.
	r := stepRow{elapsed: sec, settled: 500, cpu: 17 * time.Second, shed: 30000, work: work(10000, 3000, 1500, 500)}
	got, ok := compareCost(top, r, 100*time.Microsecond)
	want := cost{top: 17 * time.Second / 7000, step: 14 * time.Second / 5000, work: [4]float64{1, 1.2, 2.1, 0.7}}
	if !ok || got.top != want.top || got.step != want.step || !cmp.Equal(got.work, want.work, cmpopts.EquateApprox(0, 1e-9)) {
		t.Errorf("compareCost = %+v, %v; want %+v", got, ok, want)
	}
	if r := got.ratio(); r < 1.15 || r > 1.16 {
		t.Errorf("ratio = %.4f, want 2.8 / 2.43 = 1.153", r)
	}
	if _, ok := compareCost(top, stepRow{elapsed: sec, cpu: time.Second, work: r.work}, 100*time.Microsecond); ok {
		t.Error("nothing settled in the step: want no comparison")
	}
	// With fsync off no WAL flush is counted: the CPU is compared all the same.
	noFlush := stepRow{elapsed: sec, settled: 500, cpu: 17 * time.Second, shed: 30000, work: work(10000, 0, 1500, 500)}
	got, ok = compareCost(top, noFlush, 100*time.Microsecond)
	if !ok || got.step != want.step || !math.IsNaN(got.work[1]) || got.work[0] != 1 {
		t.Errorf("compareCost without WAL flushes = %+v, %v; want the CPU compared and the flushes NaN", got, ok)
	}
	if times(got.work[1]) != "-" || times(got.work[2]) != "2.10x" {
		t.Errorf("times = %q, %q; want - and 2.10x", times(got.work[1]), times(got.work[2]))
	}
}
