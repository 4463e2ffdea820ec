//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/test/chaos/history"
	"github.com/paysuite/payments/test/support/poll"
)

var (
	flagHolds = flag.Float64("chaos.holds", 0.33,
		"the share of the load's transfers sent as holds (captura MANUAL), each then captured (in part or whole), cancelled, "+
			"raced (a capture and a cancellation at once) or left to expire; 0 sends only immediate transfers")
	flagHoldExpiry = flag.Duration("chaos.hold-expiry", 150*time.Second,
		"the expiraEm of the holds left to expire, after their request: at least 1m (the contract's minimum) plus the longest "+
			"a retried POST may take (a retry re-sends the same expiraEm, which must still be 1m ahead); the run waits at most this "+
			"long after the load stops for the last of them to expire")
	flagHoldExpireFor = flag.Duration("chaos.hold-expire-for", 0,
		"send holds left to expire only in the load's first this long (0: all along), the others' fates in their shares; "+
			"the run waits for the last of them to expire, so a short one shortens the run by up to -chaos.hold-expiry")
)

// holdFate is what the load does with one hold once the ledger reserved it.
type holdFate int

const (
	fateCapture holdFate = iota // a capture, of part of the amount half the time
	fateCancel                  // a cancellation
	fateRace                    // a capture and a cancellation sent at once: one wins, the other changes nothing
	fateExpire                  // nothing: the ledger's expiry releases it, faults or not
)

// The fates' shares of the holds, in percent, in holdFate order.
var fateShares = [...]int{40, 20, 15, 25}

// commandStats counts the answers to a kind of command on a transfer
// (captures and cancellations, refunds).
type commandStats struct {
	sent, accepted202, conflict409, inProgress409, refused422, unavailable503, connErrors, status5xx, other4xx atomic.Int64
}

// holdStats counts the load's holds and their commands.
type holdStats struct {
	holds atomic.Int64
	commandStats
}

// holdPlan is one hold the load sent: its fate and, for fateExpire, when
// it expires.
type holdPlan struct {
	fate    holdFate
	expires time.Time // zero unless left to expire
}

// asHold turns r into a hold of a fate drawn from fateShares (without
// fateExpire unless expire): expiraEm flagHoldExpiry ahead for a hold left
// to expire; for one the load closes, half the time the default (7 days)
// and half the time 30 minutes, both past any run's end.
func asHold(r transferReq, now time.Time, expire bool) (transferReq, holdPlan) {
	var p holdPlan
	last, total := fateExpire, 100
	if !expire {
		last, total = fateRace, 100-fateShares[fateExpire]
	}
	n := rand.IntN(total)
	for p.fate = fateCapture; p.fate < last && n >= fateShares[p.fate]; p.fate++ {
		n -= fateShares[p.fate]
	}
	r.Capture = history.CaptureManual
	switch {
	case p.fate == fateExpire:
		p.expires = now.Add(*flagHoldExpiry)
		r.ExpiresAt = p.expires.UTC().Format(time.RFC3339)
	case rand.IntN(2) == 0:
		r.ExpiresAt = now.Add(30 * time.Minute).UTC().Format(time.RFC3339)
	}
	return r, p
}

// readBackoff paces a hold's reads until the ledger decided it: 500 ms,
// doubling, at most 8 s, jittered, so that the holds waiting out a fault
// (hundreds while the transfers database is stopped) read a few times a
// second between them, not hundreds.
var readBackoff = backoff.Exponential{Initial: 500 * time.Millisecond, Multiplier: 2, Max: 8 * time.Second, Jitter: true}

// reservedWithin bounds how long the load reads a transfer before it gives
// up waiting for the ledger to decide it (reserve a hold, settle one to
// refund; the longest fault is the transfers
// database stopped for a minute, plus the backlog behind it).
const reservedWithin = 3 * time.Minute

// driveHold follows one hold the load submitted under key: it reads it
// (recorded GETs) until the ledger decided it, then, if it is RESERVADA,
// does what its fate says. Every command is retried, with its own
// Idempotency-Key, until it gets an answer, as submit does.
func (l *load) driveHold(ctx context.Context, key string, r transferReq, p holdPlan) {
	l.mu.Lock()
	_, ok := l.accepted[key]
	l.mu.Unlock()
	if !ok || p.fate == fateExpire {
		return
	}
	if l.awaitDecided(ctx, key) != history.StatusReserved {
		return // rejected (an unfunded source), or never decided: the final checks see it
	}
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Millisecond) // a client's pause before it acts, not a wait for a condition
	switch p.fate {
	case fateCancel:
		l.command(ctx, history.KindCancel, key, 0)
	case fateRace:
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.command(ctx, history.KindCancel, key, 0)
		}()
		l.command(ctx, history.KindCapture, key, captureAmount(r.AmountCents))
		<-done
	default:
		// One capture in ten first asks one cent more than reserved (422),
		// then captures as the others do.
		if rand.IntN(10) == 0 {
			l.command(ctx, history.KindCapture, key, r.AmountCents+1)
		}
		l.command(ctx, history.KindCapture, key, captureAmount(r.AmountCents))
	}
}

// awaitDecided reads transfer key (recorded GETs, paced by readBackoff)
// until the ledger decided it, for at most reservedWithin, and returns
// the status read last: "" or PENDENTE when it was never decided (the
// final checks see it) or ctx ended.
func (l *load) awaitDecided(ctx context.Context, key string) string {
	status := ""
	deadline := time.Now().Add(reservedWithin)
	for attempt := 0; status == "" || status == history.StatusPending; attempt++ {
		select {
		case <-ctx.Done():
			return status
		case <-time.After(readBackoff.Delay(attempt)):
		}
		if time.Now().After(deadline) {
			return status
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if o, a := l.get(rctx, l.urls[rand.IntN(len(l.urls))], key); o == history.OK && a.Status == http.StatusOK {
			status = a.TransferStatus
		}
		cancel()
	}
	return status
}

// captureAmount is what a capture asks: half the time all of it (0, no
// body), otherwise part of it.
func captureAmount(reserved int64) int64 {
	if reserved < 2 || rand.IntN(2) == 0 {
		return 0
	}
	return 1 + rand.Int64N(reserved-1)
}

// command sends a capture (with amount, 0 for all) or a cancellation of
// transfer id under a new Idempotency-Key until it gets an answer, and
// records every attempt (sendCommand).
func (l *load) command(ctx context.Context, kind history.Kind, id string, amount int64) {
	path, body := "/cancelamento", []byte(nil)
	if kind == history.KindCapture {
		path = "/captura"
		if amount > 0 {
			body, _ = json.Marshal(map[string]int64{"valorEmCentavos": amount})
		}
	}
	c := history.Command{TransferID: id, AmountCents: amount}
	l.sendCommand(ctx, &l.holdStats.commandStats, id, path, body, func(invoked time.Time, outcome history.Outcome, key string, ans history.Answer) {
		if kind == history.KindCapture {
			l.rec.Capture(invoked, outcome, key, c, ans)
		} else {
			l.rec.Cancel(invoked, outcome, key, c, ans)
		}
	})
}

// sendCommand POSTs body (none if nil) to path of transfer id under a new
// Idempotency-Key until it gets an answer (202, or a final 4xx), counts
// each answer in st, records each attempt with record and returns the key
// and the last answer. The outcomes are the recorder's: 202 and a final
// 4xx (409 transfer-not-reserved or -settled, 404, 422) are known; a 409
// in progress and a 503 overloaded wrote nothing; no answer, a 503
// service-unavailable or another 5xx are unknown.
func (l *load) sendCommand(ctx context.Context, st *commandStats, id, path string, body []byte,
	record func(invoked time.Time, outcome history.Outcome, key string, ans history.Answer)) (string, history.Answer) {
	key := uuid.NewString()
	start := rand.IntN(len(l.urls))
	for attempt := 0; ; attempt++ {
		st.sent.Add(1)
		invoked := time.Now()
		status, _, b, err := l.send(ctx, l.urls[(start+attempt)%len(l.urls)]+"/transferencias/"+id+path, l.bearer, key, body)
		outcome, ans := answer(status, b, err)
		switch {
		case err != nil:
			st.connErrors.Add(1)
		case status == http.StatusAccepted:
			st.accepted202.Add(1)
		case status == http.StatusConflict && strings.HasSuffix(ans.Problem, "-in-progress"):
			st.inProgress409.Add(1)
			outcome = history.Fail
		case status == http.StatusConflict:
			st.conflict409.Add(1)
		case status == http.StatusUnprocessableEntity:
			st.refused422.Add(1)
		case status == http.StatusServiceUnavailable && strings.HasSuffix(ans.Problem, "/overloaded"):
			st.unavailable503.Add(1)
			outcome = history.Fail
		case status == http.StatusServiceUnavailable:
			st.unavailable503.Add(1)
			outcome = history.Info
		case status >= 500:
			st.status5xx.Add(1)
		case status >= 400:
			st.other4xx.Add(1)
		}
		record(invoked, outcome, key, ans)
		if outcome == history.OK || ctx.Err() != nil {
			return key, ans
		}
		select {
		case <-ctx.Done():
			return key, ans
		case <-time.After(retryBackoff.Delay(attempt + 1)):
		}
	}
}

// lastExpiry returns the latest expiraEm of the holds left to expire (zero
// if none).
func (l *load) lastExpiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, p := range l.holds {
		if p.expires.After(last) {
			last = p.expires
		}
	}
	return last
}

// holdKeys returns the keys sent as holds and their plans.
func (l *load) holdKeys() map[string]holdPlan {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]holdPlan, len(l.holds))
	for k, p := range l.holds {
		out[k] = p
	}
	return out
}

// expiryGrace is how long after a hold's expiraEm its release may take:
// the ledger's expiry task runs every few seconds, then the cancelada
// record crosses the relay and the projection.
const expiryGrace = 45 * time.Second

// awaitHolds waits, once the load stopped and its submissions were
// answered, until no accepted hold is RESERVADA any more: the load closed
// the others, and those left to expire are released within expiryGrace of
// their expiraEm (flagHoldExpiry after the last was sent: the longest this
// adds to a run). must: a hold still reserved then fails the test;
// otherwise (an asynchronous failover's lost commits) it is logged, and
// the checker judges it.
func (s *suite) awaitHolds(must bool) {
	s.t.Helper()
	holds := s.load.holdKeys()
	if len(holds) == 0 {
		return
	}
	_, accepted, _ := s.load.snapshot()
	var ids []string
	for k := range holds {
		if _, ok := accepted[k]; ok {
			ids = append(ids, k)
		}
	}
	began := time.Now()
	within := max(time.Until(s.load.lastExpiry()), 0) + expiryGrace
	var open int
	var err error
	if !poll.Wait(within, time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = s.transfer.QueryRow(ctx, `SELECT count(*) FROM transferencia WHERE id::text = ANY($1) AND status = 'RESERVADA'`, ids).Scan(&open)
		return err == nil && open == 0
	}) {
		report := s.errorf
		if !must {
			report = s.t.Logf
		}
		report("holds: %d of %d accepted holds still RESERVADA %s after the load stopped (err %v)", open, len(ids), within.Round(time.Second), err)
		return
	}
	st := &s.load.holdStats
	s.t.Logf("holds: %d sent, all %d accepted released %s after the load stopped; commands %d: 202 %d, 409 not reserved %d, 409 in progress %d, 422 %d, 503 %d, conn errors %d, other 5xx %d",
		st.holds.Load(), len(ids), time.Since(began).Round(time.Second), st.sent.Load(), st.accepted202.Load(), st.conflict409.Load(),
		st.inProgress409.Load(), st.refused422.Load(), st.unavailable503.Load(), st.connErrors.Load(), st.status5xx.Load())
	if st.status5xx.Load() > 0 {
		s.errorf("holds: %d command answers 5xx other than 503", st.status5xx.Load())
	}
}
