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
// trips, summed over the deployment's processes: the Kafka clients'
// requests by type (kafka_client_requests_total), the relays' claims that
// found events and those that found none, and PostgreSQL's commits and WAL
// flushes (pg_stat_database, pg_stat_wal) over the whole server.
func (b *bench) counters(ctx context.Context, mode string) map[string]float64 {
	out := map[string]float64{}
	for i := range services {
		// One process serves its Kafka clients' counter (one for the
		// process) on each service's port: counted once.
		scrape(ctx, b.url(i), out, i == 0 || !oneProcess(mode))
	}
	conn, err := pgx.Connect(ctx, b.serverURL)
	if err != nil {
		return out
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var commits, syncs float64
	if conn.QueryRow(ctx, "SELECT sum(xact_commit)::float8 FROM pg_stat_database").Scan(&commits) == nil {
		out["postgresql commits"] = commits
	}
	if conn.QueryRow(ctx, "SELECT wal_sync::float8 FROM pg_stat_wal").Scan(&syncs) == nil {
		out["postgresql WAL flushes (fsync)"] = syncs
	}
	return out
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

// workTable prints, per step, each counter's growth per settled transfer.
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
	fmt.Fprintf(b.out, "\n%s: round trips per settled transfer (counters' growth over the step)\n", mode)
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	rateHeader(tw, "counter", rows)
	for _, n := range sorted {
		fmt.Fprintf(tw, "%s\t", n)
		for _, r := range rows {
			settled := r.settled * r.elapsed.Seconds()
			if settled <= 0 {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%.2f\t", r.work[n]/settled)
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
