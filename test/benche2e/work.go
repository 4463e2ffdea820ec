package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// counters reads the counters that tell what a transfer costs in round
// trips and in the database's own work, summed over the deployment's
// processes: the Kafka clients' requests by type
// (kafka_client_requests_total), the relays' claims that found events and
// those that found none, PostgreSQL's commits, WAL flushes, full-page
// images and checkpoints over the whole server (serverCounters), and the
// autovacuum runs on the services' tables. PostgreSQL's are read on d's
// pools, whose connections are open already: no backend is started
// inside a step's measure.
func (b *bench) counters(ctx context.Context, mode string, d dbs) map[string]float64 {
	out := map[string]float64{}
	for i := range services {
		// One process serves its Kafka clients' counter (one for the
		// process) on each service's port: counted once.
		scrape(ctx, b.url(i), out, i == 0 || !oneProcess(mode))
	}
	// The server-wide views read the same from any database.
	serverCounters(ctx, d["transfers"], out)
	for _, s := range services {
		if n, err := autovacuums(ctx, d[s]); err == nil {
			out["postgresql autovacuum runs"] += n
		}
	}
	return out
}

// querier is what the counters' queries need of a connection or a pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// serverCounters adds to out the server-wide counters of PostgreSQL: the
// commits of every database, the WAL flushes (pg_stat_wal; from
// PostgreSQL 18, pg_stat_io's WAL fsyncs), the full-page images
// (pg_stat_wal), and the checkpoints started, timed or requested
// (pg_stat_checkpointer from PostgreSQL 17, pg_stat_bgwriter before). A
// full-page image is the whole page a checkpoint's next change of it
// writes to the WAL (full_page_writes).
func serverCounters(ctx context.Context, q querier, out map[string]float64) {
	var commits, syncs, fpi, checkpoints float64
	if q.QueryRow(ctx, "SELECT sum(xact_commit)::float8 FROM pg_stat_database").Scan(&commits) == nil {
		out["postgresql commits"] = commits
	}
	if q.QueryRow(ctx, "SELECT wal_sync::float8 FROM pg_stat_wal").Scan(&syncs) == nil ||
		q.QueryRow(ctx, "SELECT sum(fsyncs)::float8 FROM pg_stat_io WHERE object = 'wal'").Scan(&syncs) == nil {
		out["postgresql WAL flushes (fsync)"] = syncs
	}
	if q.QueryRow(ctx, "SELECT wal_fpi::float8 FROM pg_stat_wal").Scan(&fpi) == nil {
		out["postgresql full-page images"] = fpi
	}
	if q.QueryRow(ctx, "SELECT (num_timed + num_requested)::float8 FROM pg_stat_checkpointer").Scan(&checkpoints) == nil ||
		q.QueryRow(ctx, "SELECT (checkpoints_timed + checkpoints_req)::float8 FROM pg_stat_bgwriter").Scan(&checkpoints) == nil {
		out["postgresql checkpoints"] = checkpoints
	}
}

// autovacuums is how many times autovacuum has vacuumed the tables of the
// database q is connected to.
func autovacuums(ctx context.Context, q querier) (float64, error) {
	var n float64
	err := q.QueryRow(ctx, "SELECT coalesce(sum(autovacuum_count), 0)::float8 FROM pg_stat_user_tables").Scan(&n)
	return n, err
}

// scrape adds the counters of one service's /metrics to out, the Kafka
// clients' requests only when kafka is set.
func scrape(ctx context.Context, url string, out map[string]float64, kafka bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case kafka && strings.HasPrefix(name, `kafka_client_requests_total{request="`):
			out["kafka "+strings.TrimSuffix(strings.TrimPrefix(name, `kafka_client_requests_total{request="`), `"}`)] += v
		case name == "outbox_relay_batch_size_count":
			out["relay claims with events"] += v
		case name == "outbox_relay_empty_claims_total":
			out["relay claims finding none"] += v
		}
	}
}

// stepCounts are the counters workTable prints as their growth over the
// step, not per settled transfer: events a few to a step.
var stepCounts = map[string]bool{"postgresql checkpoints": true, "postgresql autovacuum runs": true}

// workTable prints, per step, each counter's growth per settled transfer
// (stepCounts' over the step).
func (b *bench) workTable(mode string, rows []stepRow) {
	names := map[string]bool{}
	for _, r := range rows {
		for n := range r.work {
			names[n] = true
		}
	}
	if len(names) == 0 {
		return
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	fmt.Fprintf(b.out, "\n%s: round trips and the database's own work per settled transfer (counters' growth over the step)\n", mode)
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	rateHeader(tw, "counter", rows)
	for _, n := range sorted {
		if stepCounts[n] {
			fmt.Fprintf(tw, "%s, in the step\t", n)
		} else {
			fmt.Fprintf(tw, "%s\t", n)
		}
		for _, r := range rows {
			switch {
			case stepCounts[n]:
				fmt.Fprintf(tw, "%.0f\t", r.work[n])
			case r.settledCount() < 1:
				fmt.Fprint(tw, "-\t")
			default:
				fmt.Fprintf(tw, "%.2f\t", counterPerSettled(r, n))
			}
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// rateHeader writes the header line of a table with a column per step:
// first, then each step's offered rate.
func rateHeader(w io.Writer, first string, rows []stepRow) {
	fmt.Fprintf(w, "%s\t", first)
	for _, r := range rows {
		fmt.Fprintf(w, "%.0f/s\t", r.offered)
	}
	fmt.Fprintln(w)
}
