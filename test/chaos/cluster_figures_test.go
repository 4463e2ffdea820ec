//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/test/chaos/history"
)

// faultFigures are what one fault did to the clients, measured from the
// history and the transfers database.
type faultFigures struct {
	// POSTs invoked between the fault and the next one: answered 202, 503,
	// anything else, and those without an answer (the client's timeout).
	posts, ok202, got503, other, unknown int
	// unknownWhy counts the client's errors of the POSTs without an
	// answer, addresses left out: a timeout (the server hung) reads apart
	// from a refused or reset connection (a process down) or the client's
	// own failure.
	unknownWhy map[string]int
	// unavailable: from the first to the last POST answered 503 (0 when
	// none was).
	unavailable time.Duration
	// settlePause: the longest gap between two consecutive settlements
	// (atualizada_em of LIQUIDADA) from 10 s before the fault to a minute
	// after (or the next fault).
	settlePause time.Duration
	// p50, p99: end-to-end latency (criada_em to atualizada_em) of the
	// transfers created in the minute after the fault (or until the next).
	p50, p99 time.Duration
	e2eN     int
}

// measure computes f's figures; next is when the next fault began (zero
// for the last).
func (s *suite) measure(h history.History, f *fault, next time.Time) faultFigures {
	var ff faultFigures
	end := next
	if end.IsZero() {
		end = f.at.Add(10 * time.Minute)
	}
	var first503, last503 time.Time
	for _, op := range h {
		if op.Kind != history.KindPost || op.Invoke.Before(f.at) || !op.Invoke.Before(end) {
			continue
		}
		ff.posts++
		switch {
		case op.Outcome == history.Info && op.Answer.Status == 0:
			ff.unknown++
			if ff.unknownWhy == nil {
				ff.unknownWhy = map[string]int{}
			}
			ff.unknownWhy[clientError(op.Answer.Error)]++
		case op.Answer.Status == http.StatusAccepted:
			ff.ok202++
		case op.Answer.Status == http.StatusServiceUnavailable:
			ff.got503++
			if first503.IsZero() || op.Complete.Before(first503) {
				first503 = op.Complete
			}
			if op.Complete.After(last503) {
				last503 = op.Complete
			}
		default:
			ff.other++
		}
	}
	if !first503.IsZero() {
		ff.unavailable = last503.Sub(first503)
	}
	minute := f.at.Add(time.Minute)
	if !next.IsZero() && next.Before(minute) {
		minute = next
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := s.transfer.Query(ctx, `SELECT atualizada_em FROM transferencia
 WHERE status = 'LIQUIDADA' AND atualizada_em BETWEEN $1 AND $2 ORDER BY atualizada_em`, f.at.Add(-10*time.Second), minute)
	if err == nil {
		settled, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err == nil {
			for i := 1; i < len(settled); i++ {
				ff.settlePause = max(ff.settlePause, settled[i].Sub(settled[i-1]))
			}
		}
	}
	rows, err = s.transfer.Query(ctx, `SELECT extract(epoch FROM atualizada_em - criada_em)::float8 FROM transferencia
 WHERE status <> 'PENDENTE' AND criada_em BETWEEN $1 AND $2`, f.at, minute)
	if err == nil {
		secs, err := pgx.CollectRows(rows, pgx.RowTo[float64])
		if err == nil && len(secs) > 0 {
			slices.Sort(secs)
			pct := func(q float64) time.Duration {
				return time.Duration(secs[min(len(secs)-1, int(q*float64(len(secs))))] * float64(time.Second))
			}
			ff.p50, ff.p99, ff.e2eN = pct(0.50), pct(0.99), len(secs)
		}
	}
	return ff
}

// printClusterFigures prints the run's figures and, per fault, how long
// POST answered 503, how long settlements paused and the end-to-end
// latency of the minute after; a pause beyond flagSettleMax fails the
// test (a generous bound), and so does a POST left without an answer
// while a synchronous standby was stopped (it must answer 503, not hang).
func (s *suite) printClusterFigures(h history.History, sent, accepted int) {
	t := s.t
	t.Helper()
	st := &s.load.stats
	var b strings.Builder
	fmt.Fprintf(&b, "transfers sent (keys) %d, accepted (202) %d; POSTs %d: 503 %d (without Retry-After %d), 409 %d, no answer %d, other 5xx %d\n",
		sent, accepted, st.posts.Load(), st.unavailable503.Load(), st.noRetryAfter.Load(), st.conflict409.Load(),
		st.connErrors.Load(), st.status5xx.Load())
	fmt.Fprintf(&b, "snapshots during the load: %d taken, %d failed\n\n", s.snapsTaken, s.snapsFailed)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "fault\tdown\tprobe terminal\tPOSTs 202/503/other/no answer\tPOST 503 for\tsettlements paused\te2e p50/p99 (n) next minute\n")
	for i, f := range s.faults {
		var next time.Time
		if i+1 < len(s.faults) {
			next = s.faults[i+1].at
		}
		ff := s.measure(h, f, next)
		down := "-"
		if !f.restored.IsZero() {
			down = f.restored.Sub(f.at).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d/%d/%d\t%s\t%s\t%s/%s (%d)\n", f.name, down, f.recovery.Round(time.Millisecond),
			ff.ok202, ff.got503, ff.other, ff.unknown, ff.unavailable.Round(time.Millisecond), ff.settlePause.Round(time.Millisecond),
			ff.p50.Round(time.Millisecond), ff.p99.Round(time.Millisecond), ff.e2eN)
		if f.note != "" {
			fmt.Fprintf(tw, "  %s\t\t\t\t\t\t\n", f.note)
		}
		if len(f.fired) > 0 {
			fmt.Fprintf(tw, "  alerts fired (wanted %v): %s\t\t\t\t\t\t\n", f.want, strings.Join(f.fired, " "))
		}
		if ff.settlePause > *flagSettleMax {
			s.errorf("fault %q: settlements paused %s, want at most %s", f.name, ff.settlePause, *flagSettleMax)
		}
		if ff.unknown > 0 {
			fmt.Fprintf(tw, "  POSTs without an answer: %s\t\t\t\t\t\t\n", countsOf(ff.unknownWhy))
		}
		if strings.HasPrefix(f.name, "synchronous standby of the transfers") && ff.unknown > 0 {
			s.errorf("fault %q: %d POSTs got no answer within the client's timeout (want 503, not a hang): %s", f.name, ff.unknown, countsOf(ff.unknownWhy))
		}
	}
	_ = tw.Flush()
	t.Logf("chaos cluster figures:\n%s", b.String())
}

// addrPattern matches a host:port in a client error.
var addrPattern = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`)

// clientError is an HTTP client error without its request line and
// addresses, so that errors of one kind count together: "context deadline
// exceeded (Client.Timeout exceeded while awaiting headers)", "dial tcp
// ADDR: connect: connection refused".
func clientError(msg string) string {
	if i := strings.LastIndex(msg, "\": "); i >= 0 {
		msg = msg[i+3:]
	}
	return addrPattern.ReplaceAllString(msg, "ADDR")
}

// countsOf lists counts, most first: "3 x timeout; 1 x refused".
func countsOf(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d x %s", m[k], k))
	}
	return strings.Join(parts, "; ")
}
