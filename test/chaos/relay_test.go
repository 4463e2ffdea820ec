//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/poll"
)

// flagRelay is the outbox relay every service runs (OUTBOX_RELAY).
var flagRelay = flag.String("chaos.relay", "polling", "the outbox relay of every service: polling or logical (OUTBOX_RELAY)")

// relayPairOpts checks -chaos.relay for TestChaosCluster and returns the
// PostgreSQL pairs' extra options: the logical relay's needs, and for the
// polling relay none (the pairs as they have always run). The pairs name
// their synchronous standby (cluster.SyncStandbyNames), so the relay's own
// replication connection is never a candidate.
func relayPairOpts(t *testing.T) []string {
	t.Helper()
	switch *flagRelay {
	case "polling":
		return nil
	case "logical":
		return cluster.LogicalOpts
	}
	t.Fatalf("-chaos.relay=%q: want polling or logical", *flagRelay)
	return nil
}

// takeoverMax is the accepted takeover: -chaos.takeover-max when given,
// else 1 s for the polling relay (leases) and 2 s for the logical relay (a
// kill -9 on the same host; the slot is free once the server sees the
// walsender's connection gone).
func takeoverMax() time.Duration {
	if *flagTakeover > 0 {
		return *flagTakeover
	}
	if *flagRelay == "logical" {
		return 2 * time.Second
	}
	return time.Second
}

// logicalActive reads outbox_logical_active from an instance's /metrics:
// whether it streams the slot.
func logicalActive(url string) bool {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return false
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "outbox_logical_active "); ok {
			return strings.TrimSpace(v) == "1"
		}
	}
	return false
}

// logicalTakeover is the takeover of the logical relay: it kills -9 the
// transfers instance that streams the slot and measures the time from the
// kill until its sibling streams and a new event of transfers is readable
// on its topic: past the topic's ends read once the killed process is
// gone, and only once the sibling reports itself active, so that records
// the dead instance had sent cannot pass for the sibling's.
func (s *suite) logicalTakeover() (time.Duration, int) {
	s.t.Helper()
	var active, other string
	if !poll.Wait(30*time.Second, 10*time.Millisecond, func() bool {
		for _, n := range []string{"transfers-a", "transfers-b"} {
			if logicalActive(s.procs[n].url()) {
				active = n
				return true
			}
		}
		return false
	}) {
		s.errorf("takeover: neither transfers instance streams the slot (outbox_logical_active) within 30s")
		return -1, 0
	}
	other = map[string]string{"transfers-a": "transfers-b", "transfers-b": "transfers-a"}[active]
	ctx := context.Background()
	f := s.begin(fmt.Sprintf("kill -9 %s streaming the slot (logical takeover)", active), "ServiceDown{transfers}")
	killedAt := time.Now()
	s.procs[active].kill9()
	// The topic's ends once the killed instance is gone: what grows past
	// them is the sibling's.
	_, before, err := offsets(ctx, s.kc, s.topics.Requested)
	if err != nil {
		s.t.Fatalf("takeover: offsets: %v", err)
	}
	var took time.Duration
	var events int64
	var streaming bool
	if !poll.Wait(time.Minute, 10*time.Millisecond, func() bool {
		if !streaming {
			streaming = logicalActive(s.procs[other].url())
			if !streaming {
				return false
			}
		}
		_, end, err := offsets(ctx, s.kc, s.topics.Requested)
		if err != nil {
			return false
		}
		events = 0
		for p, o := range end {
			events += o - before[p]
		}
		if events > 0 {
			took = time.Since(killedAt)
			return true
		}
		return false
	}) {
		s.errorf("takeover: %s streaming %v, no new event of transfers published within 1m of the kill of %s", other, streaming, active)
		return -1, 0
	}
	f.note = fmt.Sprintf("%s streamed and published %d events %s after the kill", other, events, took.Round(time.Millisecond))
	s.settle(*flagDown)
	s.procs[active].start(s.t)
	f.restored = time.Now()
	s.awaitRecovery(f, time.Minute)
	return took, int(events)
}

// peakBackends samples the client backends of p's primary every 200 ms
// until stop is closed, then sends a line with the most seen, in all and
// waiting for the synchronous standby (wait_event SyncRep). A call cut
// off by its deadline closes its connection (pgx sends no cancel
// request), and its backend stays in that wait, holding its slot, until
// the standby is back; the pools meanwhile open new connections.
func peakBackends(p *cluster.Pair, stop <-chan struct{}) <-chan string {
	out := make(chan string, 1)
	go func() {
		var peak, peakWaiting int
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		}()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				out <- fmt.Sprintf("client backends on the primary: at most %d, %d of them waiting for the standby", peak, peakWaiting)
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if conn == nil {
				conn, _ = pgx.Connect(ctx, p.Primary().DSN("postgres", "chaos-backends"))
			}
			var n, waiting int
			if conn != nil && conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE wait_event = 'SyncRep')
  FROM pg_stat_activity WHERE backend_type = 'client backend'`).Scan(&n, &waiting) == nil {
				peak, peakWaiting = max(peak, n), max(peakWaiting, waiting)
			} else if conn != nil {
				_ = conn.Close(ctx)
				conn = nil
			}
			cancel()
		}
	}()
	return out
}
