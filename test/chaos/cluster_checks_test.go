//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/poll"
)

// startProm starts Prometheus scraping every process of the suite with
// the deployed alert rules.
func (s *suite) startProm(root string) {
	s.t.Helper()
	jobs := map[string][]string{}
	for _, p := range s.procs {
		jobs[p.job] = append(jobs[p.job], "127.0.0.1:"+strconv.Itoa(p.port))
	}
	s.prom = startPrometheus(s.t, root, jobs)
}

// checkAlerts fails the test for each fault whose wanted alerts did not
// fire between its start and the next fault's (Prometheus's own record
// of ALERTS), and keeps what fired for the figures. The last fault's may
// need another evaluation round of the rules (1 s).
func (s *suite) checkAlerts(ctx context.Context) {
	s.t.Helper()
	lastF := s.faults[len(s.faults)-1]
	poll.Wait(10*time.Second, 500*time.Millisecond, func() bool {
		fired, err := s.prom.queryAlerts(ctx, lastF.at, time.Now())
		if err != nil {
			return false
		}
		for _, w := range lastF.want {
			if !fired[w] {
				return false
			}
		}
		return true
	}) // an alert still missing is reported below
	for i, f := range s.faults {
		end := time.Now()
		if i+1 < len(s.faults) {
			end = s.faults[i+1].at
		}
		fired, err := s.prom.queryAlerts(ctx, f.at, end)
		if err != nil {
			s.t.Fatalf("query Prometheus: %v", err)
		}
		for a := range fired {
			f.fired = append(f.fired, a)
		}
		sort.Strings(f.fired)
		for _, w := range f.want {
			if !fired[w] {
				s.errorf("fault %q: alert %s did not fire (fired: %v)", f.name, w, f.fired)
			}
		}
	}
}

// awaitInFlight waits (up to 10 s) until one of the load's POSTs is in
// flight, so that the fault injected right after cuts into a write; the
// history's window of that fault must then show it (WritesInFlight).
func (s *suite) awaitInFlight(what string) {
	s.t.Helper()
	if !poll.Wait(10*time.Second, time.Millisecond, func() bool { return s.load.inFlight.Load() > 0 }) {
		s.errorf("%s: no POST in flight within 10s", what)
	}
}

// onPair marks what a fault of pair pr does to the clients and which
// alerts it must fire: primary (a kill or a hang of the primary) or not
// (the synchronous standby stopped). A stopped standby wants no alert on
// either pair: its commits wait with no alert of their own, and the
// consumers' dependency alert fires only if some result reaches the
// transfers projection while its commits wait, which a run may or may not
// give (one CI run of the logical relay had none in the 19 s window). The
// standby's state is the database's to report (pg_stat_replication), and
// the suite exports none of it.
func (s *suite) onPair(f *fault, pr *pgPair, primary bool) {
	transfers := pr.p == s.pairB
	switch {
	case transfers && primary:
		f.transfersDown, f.noReads, f.cutsWrites = true, true, true
		f.want = append(f.want, "ConsumerWaitingForDependency{transfers}")
	case transfers:
		f.transfersDown = true // POSTs answer 503: their commits may stand
	case primary:
		// As TestChaos's crash of that database cluster: antifraud's
		// consumer waits for its database (the ledger's own alert can
		// give way to ServiceDown when the ledger hangs with it).
		f.noSnapshots = true
		f.want = append(f.want, "ConsumerWaitingForDependency{antifraud}")
	}
}

// leaderMoved fails the test unless the leadership of topic/partition
// leaves node (killed) within a minute, and notes where it went.
func (s *suite) leaderMoved(f *fault, topic string, partition, node int) {
	s.t.Helper()
	var next int
	var err error
	if !poll.Wait(time.Minute, poll.Interval, func() bool {
		next, err = s.kafka.Leader(topic, partition)
		return err == nil && next != node
	}) {
		s.errorf("%s: the leader of %s/%d is still node %d a minute after its kill (%d, %v)", f.name, topic, partition, node, next, err)
		return
	}
	f.note = fmt.Sprintf("leader of %s/%d moved from node %d to %d, %s after the kill", topic, partition, node, next,
		time.Since(f.at).Round(time.Millisecond))
}

// primaryChanged fails the test unless the pair's primary is another
// server than old, that server takes itself for a primary
// (pg_is_in_recovery false) and old, fenced, for a standby (true).
func (s *suite) primaryChanged(f *fault, pr *pgPair, old *cluster.PG) {
	s.t.Helper()
	cur := pr.p.Primary()
	if cur == old {
		s.errorf("%s: the pair's primary is still %s", f.name, old.Addr())
		return
	}
	newRec, newErr := inRecovery(cur)
	var oldRec bool
	var oldErr error
	poll.Wait(time.Minute, 200*time.Millisecond, func() bool { // the fenced server starting as a standby
		oldRec, oldErr = inRecovery(old)
		return oldErr == nil
	})
	if newErr != nil || newRec || oldErr != nil || !oldRec {
		s.errorf("%s: primary %s -> %s, pg_is_in_recovery new %v (%v), old %v (%v): want false and true",
			f.name, old.Addr(), cur.Addr(), newRec, newErr, oldRec, oldErr)
		return
	}
	f.note += fmt.Sprintf("; primary %s -> %s (pg_is_in_recovery: new false, old true)", old.Addr(), cur.Addr())
}

func inRecovery(pg *cluster.PG) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := postgres.Open(ctx, pg.DSN("postgres", "chaos-primary-check"), 1)
	if err != nil {
		return false, err
	}
	defer db.Close()
	var rec bool
	err = db.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec)
	return rec, err
}
