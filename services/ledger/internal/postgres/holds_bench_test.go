package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
)

// BenchmarkHolds measures a hold, its capture and its release (a
// cancellation) beside the immediate settlement, in the same run, on the
// same database, spread over 1,000 accounts by 8 workers as
// BenchmarkSettlement's spread case, one per transaction and in batches
// of 50. Each reports the CPU per operation of this process and of the
// PostgreSQL backends serving it (cpu-µs/op) and, beside the settlement,
// x-settle; the capture also reports hold+capture-x-settle, the CPU of a
// hold and its capture against one immediate settlement (the aim: at
// most 2.5). The holds a capture or a release closes are made before its
// timer starts.
func BenchmarkHolds(b *testing.B) {
	const workers = 8
	s, db, ids := benchAccounts(b)
	ctx := context.Background()
	for _, batch := range []int{1, 50} {
		cpu := map[string]float64{}
		for _, op := range []string{"settle", "hold", "capture", "release"} {
			b.Run(fmt.Sprintf("batch-%d/%s", batch, op), func(b *testing.B) {
				rnd := rand.New(rand.NewPCG(uint64(b.N), uint64(batch)))
				streams := make([][]ledger.Transfer, workers)
				for i := range b.N {
					w := i % workers
					t := benchTransfer(rnd, ids, ids[(rnd.IntN(benchAccountCount/workers))*workers+w])
					t.Hold, t.ExpiresAt = op != "settle", time.Now().Add(time.Hour)
					streams[w] = append(streams[w], t)
				}
				settleAll := func(ts []ledger.Transfer) error {
					rs, err := s.Settle(ctx, ts, rules.Decider(time.Now()))
					return expect(rs, err, map[bool]ledger.Outcome{false: ledger.Settled, true: ledger.Reserved}[ts[0].Hold])
				}
				run := func(ts []ledger.Transfer) error { return settleAll(ts) }
				if op == "capture" || op == "release" {
					if err := runStreams(streams, 50, settleAll); err != nil {
						b.Fatal(err)
					}
					kind, want := ledger.Capture, ledger.Settled
					if op == "release" {
						kind, want = ledger.Cancel, ledger.Cancelled
					}
					run = func(ts []ledger.Transfer) error {
						cs := make([]ledger.Command, len(ts))
						for i, t := range ts {
							cs[i] = ledger.Command{Kind: kind, TransferID: t.ID, EventID: uuid.New(), Source: t.Source,
								AmountCents: t.AmountCents, ClientID: t.ClientID}
						}
						rs, err := s.CloseReservations(ctx, cs, rules.Closer(time.Now()))
						return expect(rs, err, want)
					}
				}
				if _, err := db.Exec(ctx, "VACUUM (ANALYZE) account, processed_transfer, posting, reservation, outbox_event"); err != nil {
					b.Fatal(err)
				}
				before := cpuNow(b, db)
				b.ResetTimer()
				if err := runStreams(streams, batch, run); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				perOp := float64((cpuNow(b, db) - before).Microseconds()) / float64(b.N)
				cpu[op] = perOp
				b.ReportMetric(perOp, "cpu-µs/op")
				if op != "settle" && cpu["settle"] > 0 {
					b.ReportMetric(perOp/cpu["settle"], "x-settle")
				}
				if op == "capture" && cpu["settle"] > 0 {
					b.ReportMetric((cpu["hold"]+perOp)/cpu["settle"], "hold+capture-x-settle")
				}
			})
		}
	}
}

// expect is err, or an error if a result of rs is not want.
func expect(rs []ledger.Result, err error, want ledger.Outcome) error {
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Outcome != want {
			return fmt.Errorf("transfer %s: %s, want %s", r.TransferID, r.Outcome, want)
		}
	}
	return nil
}

// runStreams runs each stream on its own goroutine, batch items at a
// time, in order, and returns the first error.
func runStreams[T any](streams [][]T, batch int, fn func([]T) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, stream := range streams {
		wg.Go(func() {
			for len(stream) > 0 {
				n := min(batch, len(stream))
				if err := fn(stream[:n]); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				stream = stream[n:]
			}
		})
	}
	wg.Wait()
	return first
}

// cpuNow is the CPU time used so far by this process and by the
// PostgreSQL backends connected to db's database (read from
// /proc/<pid>/stat, so only for a server on this machine; the benchmark
// fails otherwise rather than report a partial figure).
func cpuNow(b *testing.B, db *pgplatform.DB) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	rows, err := db.Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			b.Fatalf("CPU of PostgreSQL backend %d (the server must run on this machine): %v", pid, err)
		}
		// Fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th, in clock ticks of 10 ms (USER_HZ 100).
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		for _, i := range []int{11, 12} {
			ticks, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				b.Fatalf("backend %d stat: %v", pid, err)
			}
			total += time.Duration(ticks) * 10 * time.Millisecond
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return total
}
