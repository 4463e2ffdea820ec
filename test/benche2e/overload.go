package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// overloadedType is the problem type of a request shed at the door.
var overloadedType = httpapi.TypeURI(errkind.Overloaded)

// overloadSteps offers, after the rates, each -overload multiple of the
// plateau the rates found, and returns rows with those steps added. A step
// left undrained does not end the series: overload is what is measured.
func (b *bench) overloadSteps(ctx context.Context, mode string, d dbs, procs []*proc, accounts []string, rows []stepRow) ([]stepRow, error) {
	top := plateau(rows)
	if top <= 0 || len(b.o.overload) == 0 {
		return rows, nil
	}
	b.waitDrained(ctx, d, b.o.drain)
	for _, m := range b.o.overload {
		row, err := b.step(ctx, mode, d, procs, accounts, m*top)
		if err != nil {
			return rows, err
		}
		row.multiple = m
		row.sustained = false
		rows = append(rows, row)
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return rows, err
			}
		}
		if row.undrained > 0 {
			fmt.Fprintf(b.out, "(%.0fx the plateau left %d transfers PENDENTE after the %s drain)\n", m, row.undrained, b.o.drain)
		}
	}
	return rows, nil
}

// plateau is the highest settled/s of the rates (overload steps left out).
func plateau(rows []stepRow) float64 {
	r, _ := plateauRow(rows)
	return r.settled
}

// plateauRow returns the rate step (not an overload step) of rows that
// settled the most.
func plateauRow(rows []stepRow) (stepRow, bool) {
	var best stepRow
	found := false
	for _, r := range rows {
		if r.multiple == 0 && (!found || r.settled > best.settled) {
			best, found = r, true
		}
	}
	return best, found
}

// stepName is "rate" for a rate, "Nx plateau" for an overload step.
func stepName(r stepRow) string {
	if r.multiple == 0 {
		return "rate"
	}
	return fmt.Sprintf("%gx plateau", r.multiple)
}

// cpuPerSettled is the CPU of every process over the step (the services'
// and PostgreSQL's and the broker's) per transfer settled in it.
func cpuPerSettled(row stepRow, settled int) time.Duration {
	if settled <= 0 {
		return 0
	}
	var total time.Duration
	for _, u := range row.usage {
		total += u[1].cpu - u[0].cpu
	}
	for _, cpu := range row.servers {
		total += cpu
	}
	return total / time.Duration(settled)
}

// overloadSummary prints mode's plateau and its overload steps against the
// aims (settled at least 0.9x the plateau, accepted e2e p99 under 2 s,
// nothing pending after the drain).
func (b *bench) overloadSummary(mode string) {
	top := b.plateau[mode]
	ratio := 0.0
	if b.postRate > 0 {
		ratio = top / b.postRate
	}
	fmt.Fprintf(b.out, "%s: plateau %.1f settled/s = %.2f x POST alone (aim >= 0.85)\n", mode, top, ratio)
	// On cores the flow shares, the plateau over POST alone can be about
	// the CPU of a POST alone over the CPU of a settled transfer at most,
	// once the cores are full at the plateau's step (below that, the
	// plateau is only the rate offered).
	if step, ok := plateauRow(b.rows[mode]); ok && step.cpuPerSettled > 0 && b.postCPU > 0 {
		fmt.Fprintf(b.out, "%s: CPU per settled transfer at the plateau's step %s ms = %.1f x a POST alone's %s ms: with the cores full (%.2f of %d busy at that step) the plateau is bounded near %.2f x POST alone\n",
			mode, msf(step.cpuPerSettled), float64(step.cpuPerSettled)/float64(b.postCPU), msf(b.postCPU),
			step.busyCores(), runtime.NumCPU(), float64(b.postCPU)/float64(step.cpuPerSettled))
	}
	step, _ := plateauRow(b.rows[mode])
	for _, r := range b.rows[mode] {
		if r.multiple == 0 || top <= 0 {
			continue
		}
		fmt.Fprintf(b.out, "%s: %gx the plateau (%.0f/s offered): settled %.1f/s = %.2f x plateau (aim >= 0.9), shed %.1f/s, accepted e2e p99 %s ms (aim < 2000), pending after the drain %d (aim 0), heap %.1f MiB, CPU %s ms per settled\n",
			mode, r.multiple, r.offered, r.settled, r.settled/top, float64(r.shed)/b.o.step.Seconds(), ms(r.e2e.p99), r.undrained, r.heapMiB, msf(r.cpuPerSettled))
		if ls, ok := loadShare(step, r, b.shedCPU); ok {
			fmt.Fprintf(b.out, "%s: %gx the plateau: the offered load's own cost takes %.2f of the %.2f cores the flow used at the plateau's step (the load generator %.2f cores more, the door's shed answers %.2f at %s ms each); at the plateau's CPU per settled transfer the rest settles at most %.2f x plateau\n",
				mode, r.multiple, ls.generator+ls.door, ls.flow, ls.generator, ls.door, msf3(b.shedCPU), ls.bound)
			if fc, ok := compareCost(step, r, b.shedCPU); ok {
				fmt.Fprintf(b.out, "%s: %gx the plateau: the flow's own CPU per settled transfer (the door's shed answers taken out) %s ms = %.2f x the plateau step's %s ms, so on full cores it settles near %.2f x plateau (the bound over that); per settled transfer against the plateau step: PostgreSQL commits %s, WAL flushes %s, Kafka fetches %s, produces %s\n",
					mode, r.multiple, msf(fc.step), fc.ratio(), msf(fc.top), ls.bound/fc.ratio(),
					times(fc.work[0]), times(fc.work[1]), times(fc.work[2]), times(fc.work[3]))
			}
		}
	}
}

// share is what an overload step's offered load itself takes of the cores
// the flow used at the plateau's step, in cores: the load generator's CPU
// above the plateau step's (it runs on the same cores) and the door's
// answers (the shed requests a second times the CPU of one shed POST
// alone); bound is the settled rate over the plateau's that the cores left
// allow at the plateau step's CPU per settled transfer.
type share struct{ generator, door, flow, bound float64 }

// loadShare is r's share against the plateau's step top, with shedCPU the
// CPU of one shed POST; false when a figure is missing.
func loadShare(top, r stepRow, shedCPU time.Duration) (share, bool) {
	cores := func(d, over time.Duration) float64 { return d.Seconds() / over.Seconds() }
	if top.elapsed <= 0 || r.elapsed <= 0 || top.cpu <= 0 || shedCPU <= 0 {
		return share{}, false
	}
	s := share{
		generator: max(0, cores(r.generator, r.elapsed)-cores(top.generator, top.elapsed)),
		door:      float64(r.shed) / r.elapsed.Seconds() * shedCPU.Seconds(),
		flow:      cores(top.cpu, top.elapsed),
	}
	s.bound = max(0, s.flow-s.generator-s.door) / s.flow
	return s, true
}

// msf is d in milliseconds with one decimal.
func msf(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// costCounters are the work counters compareCost sets beside the CPU: the
// round trips whose count per settled transfer falls as batches grow.
var costCounters = [...]string{"postgresql commits", "postgresql WAL flushes (fsync)", "kafka Fetch", "kafka Produce"}

// cost compares the flow's own CPU per settled transfer in a step (step)
// with the plateau step's (top), and each of costCounters per settled
// transfer (work, the step's over the plateau step's). On full cores a
// step's settled rate over the plateau's is the bound loadShare gives over
// ratio: what the cores left settle at what each transfer cost in the step.
type cost struct {
	top, step time.Duration
	work      [len(costCounters)]float64
}

// ratio is the step's CPU per settled transfer over the plateau step's.
func (c cost) ratio() float64 { return float64(c.step) / float64(c.top) }

// compareCost is r's cost against the plateau's step top, with shedCPU the
// CPU of one shed POST; false when either step settled nothing. A counter
// either step did not count (WAL flushes with fsync off) compares as NaN.
func compareCost(top, r stepRow, shedCPU time.Duration) (cost, bool) {
	c := cost{top: flowCost(top, shedCPU), step: flowCost(r, shedCPU)}
	if c.top <= 0 || c.step <= 0 {
		return cost{}, false
	}
	for i, n := range costCounters {
		c.work[i] = math.NaN()
		if a, b := counterPerSettled(r, n), counterPerSettled(top, n); a > 0 && b > 0 {
			c.work[i] = a / b
		}
	}
	return c, true
}

// times is v as a multiple, "-" for NaN.
func times(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

// flowCost is the CPU of every process over the step (PostgreSQL's and the
// broker's included, the load generator's not) less the door's answers to
// the POSTs it shed, at shedCPU each, per transfer settled in the step; 0
// when none settled.
func flowCost(r stepRow, shedCPU time.Duration) time.Duration {
	return perSettled(max(r.cpu-time.Duration(r.shed)*shedCPU, 0), r)
}

// counterPerSettled is counter n's growth over the step per transfer settled in
// it; 0 when none settled.
func counterPerSettled(r stepRow, n string) float64 {
	settled := r.settledCount()
	if settled < 1 {
		return 0
	}
	return r.work[n] / settled
}
