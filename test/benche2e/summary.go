package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// summary prints the run's figures against the aims, each a ratio to a
// baseline of the same run.
func (b *bench) summary() {
	fmt.Fprintf(b.out, "== Summary, OUTBOX_RELAY=%s (each figure from this run; the aims are the README's)\n", b.o.relay)
	fmt.Fprintf(b.out, "POST alone: %.0f/s; three-hop floor: %s ms; one durable commit: p50 %s ms, so the durable floor (three hops and the three commits on the path: POST, decision, posting): %s ms\n",
		b.postRate, msf(3*b.floorP50), msf(b.commitP50), msf(b.durableFloor()))
	if b.shedRate > 0 {
		fmt.Fprintf(b.out, "POST shed alone (admission forced to shed, %d clients closed loop): %.0f/s; CPU %s ms per shed POST = %.3f x an accepted POST alone's\n",
			b.o.postClients, b.shedRate, msf3(b.shedCPU), float64(b.shedCPU)/float64(max(b.postCPU, 1)))
	}
	for _, m := range b.o.modes {
		s := b.sustained[m]
		ratio := 0.0
		if b.postRate > 0 {
			ratio = s / b.postRate
		}
		rows := b.rows[m]
		bound := ""
		if len(rows) > 0 && rows[len(rows)-1].sustained && rows[len(rows)-1].offered == s {
			bound = " (the highest rate offered: offer more with -rates)"
		}
		fmt.Fprintf(b.out, "%s: sustained %.0f/s%s = %.2f x POST alone (aim >= 0.5)\n", m, s, bound, ratio)
		b.overloadSummary(m)
		top, _ := plateauRow(rows)
		if at, ok := nearest(rows, 100); ok && at.offered == 100 && top.cpuPerSettled > 0 {
			fmt.Fprintf(b.out, "%s: CPU per settled transfer at 100/s: %s ms = %.2f x the plateau step's %s ms (aim <= 1.5); of which the broker's JIT compiler %s ms\n",
				m, msf(at.cpuPerSettled), float64(at.cpuPerSettled)/float64(top.cpuPerSettled), msf(top.cpuPerSettled),
				msf(perSettled(at.jit, at)))
			if idle, ok := nearest(rows, 1); ok && idle.offered == 1 {
				if sh, ok := splitIdle(idle, at, top); ok {
					fmt.Fprintf(b.out, "%s: the suite at 1/s (idle but for one transfer a second): %.2f cores, %s ms of each transfer at 100/s; the aim leaves a transfer %s ms of its own at 100/s, against %s ms at the plateau step (its CPU less the idle share)\n",
						m, sh.cores, msf(sh.at), msf(sh.left), msf(sh.topOwn))
				}
			}
			if b.floorP50 > 0 {
				fmt.Fprintf(b.out, "%s: e2e at 100/s: p50 %s ms = %.1f x the three-hop floor (aim <= 3), %.1f x the durable floor; p99 %s ms = %.1f x the three-hop floor (aim <= 10)\n",
					m, ms(at.e2e.p50), float64(at.e2e.p50)/float64(3*b.floorP50), float64(at.e2e.p50)/float64(max(b.durableFloor(), 1)),
					ms(at.e2e.p99), float64(at.e2e.p99)/float64(3*b.floorP50))
			}
		}
		if idle, ok := nearest(rows, 1); ok && idle.offered == 1 && idle.e2e.n > 0 && b.floorP50 > 0 {
			alone, durable := latencyAlone(idle, b.floorP50, b.durableFloor())
			fmt.Fprintf(b.out, "%s: e2e at 1/s (the machine idle but for it: no queue, no batch): p50 %s ms = %.1f x the three-hop floor, %.1f x the durable floor: what a transfer's hops take alone, against the aim's 3x at 100/s\n",
				m, ms(idle.e2e.p50), alone, durable)
		}
		// The offered rate nearest half the sustained one.
		if half, ok := nearest(rows, s/2); ok {
			fmt.Fprintf(b.out, "%s: e2e p99 at %.0f/s (nearest half the sustained rate): %s ms (aim < 250)\n", m, half.offered, ms(half.e2e.p99))
		}
	}
	fmt.Fprintln(b.out)
}

// idleShare is what the suite costs with nothing to do, from a step of
// 1/s, and what that leaves of the aim on CPU at a low rate.
type idleShare struct {
	// cores is every process's CPU at 1/s (the load generator's aside)
	// over the step's length.
	cores float64
	// at is cores spread over the transfers the low rate's step settled a
	// second; left is 1.5x the plateau step's CPU per settled transfer
	// (the aim) less at: what the aim leaves a transfer of its own; topOwn
	// is the plateau step's CPU per settled transfer less cores spread
	// over its transfers: a transfer's own cost in full batches.
	at, left, topOwn time.Duration
}

// splitIdle splits the CPU per settled transfer of the step at (a low
// rate) and top (the plateau) into the idle suite's share, read from the
// step idle, and a transfer's own; false when a step has no length or
// settled nothing.
func splitIdle(idle, at, top stepRow) (idleShare, bool) {
	if idle.elapsed <= 0 || at.settled <= 0 || top.settled <= 0 {
		return idleShare{}, false
	}
	cores := rowCPU(idle).Seconds() / idle.elapsed.Seconds()
	share := func(r stepRow) time.Duration { return time.Duration(cores / r.settled * float64(time.Second)) }
	sh := idleShare{cores: cores, at: share(at), topOwn: top.cpuPerSettled - share(top)}
	sh.left = time.Duration(1.5*float64(top.cpuPerSettled)) - sh.at
	return sh, true
}

// latencyAlone is the e2e p50 of the step idle (1/s: each transfer
// travels alone, nothing queued or batched) over the three-hop floor
// (floor is one hop's) and over the durable floor.
func latencyAlone(idle stepRow, floor, durable time.Duration) (overFloor, overDurable float64) {
	return float64(idle.e2e.p50) / float64(3*floor), float64(idle.e2e.p50) / float64(max(durable, 1))
}

// durableFloor is the three-hop floor plus the three durable commits every
// transfer waits for between its criada_em and its atualizada_em: the
// POST's, the antifraud decision's and the ledger posting's (the
// projection sets atualizada_em before its own commit).
func (b *bench) durableFloor() time.Duration { return 3*b.floorP50 + 3*b.commitP50 }

// perSettled is d per transfer settled in row's step.
func perSettled(d time.Duration, row stepRow) time.Duration {
	n := int(row.settledCount())
	if n <= 0 {
		return 0
	}
	return d / time.Duration(n)
}

// rowCPU is the CPU of every process over the step: the services',
// PostgreSQL's and the broker's.
func rowCPU(row stepRow) time.Duration {
	var total time.Duration
	for _, u := range row.usage {
		total += u[1].cpu - u[0].cpu
	}
	for _, cpu := range row.servers {
		total += cpu
	}
	return total
}

// durability reports the server's fsync, synchronous_commit and
// full_page_writes settings, printed beside the figures they shape.
func durability(ctx context.Context, serverURL string) string {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "settings unknown: " + err.Error()
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var parts []string
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return "settings unknown: " + err.Error()
		}
		parts = append(parts, name+"="+v)
	}
	return strings.Join(parts, " ")
}

// commitLatencies times n one-row commits, one after another, on the
// server's own database: what one durable commit waits for (the WAL
// flushed to disk, with fsync on).
func commitLatencies(ctx context.Context, serverURL string, n int) ([]time.Duration, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_e2e_commit (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := conn.Exec(ctx, "INSERT INTO bench_e2e_commit DEFAULT VALUES"); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	_, err = conn.Exec(ctx, "DROP TABLE bench_e2e_commit")
	return out, err
}

// msf3 is d in milliseconds with three decimals.
func msf3(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d.Nanoseconds())/1e6) }
