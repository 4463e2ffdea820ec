//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/chaos/history"
)

var (
	flagRefunds = flag.Float64("chaos.refunds", 0.2,
		"the share of the load's immediate transfers refunded once settled, while the faults run: in part (or whole), twice at once "+
			"with different keys asking together more than was paid, or in part and then beyond what remains (a 422 or a REJEITADO "+
			"VALOR_EXCEDE_ESTORNAVEL); 0 refunds none")
	flagStatements = flag.Bool("chaos.statements", true,
		"snapshots read every posting's running balance, and the run ends with statements and balances at instants of some of "+
			"the load's accounts, for the history checker's running-balance and statement kinds")
)

// refundFate is what the load does with a settled transfer it refunds.
type refundFate int

const (
	refundPart   refundFate = iota // one refund, of part of it three times in four, of all that remains otherwise
	refundRace                     // two refunds with different keys at once, asking together more than it
	refundBeyond                   // a refund of part, then one of more than remains
)

// The fates' shares of the refunded transfers, in percent, in refundFate
// order.
var refundShares = [...]int{40, 30, 30}

func pickRefundFate() refundFate {
	n := rand.IntN(100)
	f := refundPart
	for ; f < refundBeyond && n >= refundShares[f]; f++ {
		n -= refundShares[f]
	}
	return f
}

// refundAmounts returns what fate's refunds of a transfer of cents ask (0:
// all that remains): the first, and the second for refundRace (at once)
// and refundBeyond (after the first was answered); 0 and false when there
// is no second.
func refundAmounts(f refundFate, cents int64) (first, second int64, two bool) {
	part := int64(0)
	if cents >= 2 {
		part = 1 + rand.Int64N(cents-1)
	}
	switch f {
	case refundRace:
		half := cents/2 + 1 // two of them exceed cents
		if cents < 2 {
			half = 0 // all of it, twice
		}
		return half, half, true
	case refundBeyond:
		if part == 0 {
			return 0, 1, true // all of it, then one cent more
		}
		return part, cents - part + 1, true
	}
	if rand.IntN(4) == 0 {
		part = 0
	}
	return part, 0, false
}

// refundTrack is what the load knows of a refund key it sent: its
// transfer, and whether it is over (read LIQUIDADO or REJEITADO, or 404;
// or refused with a final 4xx, which created nothing).
type refundTrack struct {
	transfer string
	over     bool
}

// track notes what a refund key's answer or read said.
func (l *load) track(key, transfer string, over bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.refunds[key]
	if t == nil {
		t = &refundTrack{transfer: transfer}
		l.refunds[key] = t
	}
	t.over = t.over || over
}

// refundKeys returns the keys of the transfers the load means to refund.
func (l *load) refundKeys() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.toRefund)
}

// refundStats counts the load's refunds and their answers.
type refundStats struct {
	refunded atomic.Int64 // the transfers the load chose to refund
	commandStats
}

// driveRefund follows an immediate transfer the load submitted under key
// and means to refund: it reads it until the ledger decided it and, if it
// is LIQUIDADA, refunds it as fate says, each refund under its own
// Idempotency-Key, retried until answered; then it reads each refund
// answered 202 until its end. A transfer never settled is left alone.
func (l *load) driveRefund(ctx context.Context, key string, r transferReq, fate refundFate) {
	l.mu.Lock()
	_, ok := l.accepted[key]
	l.mu.Unlock()
	if !ok || l.awaitDecided(ctx, key) != history.StatusSettled {
		return
	}
	l.refundStats.refunded.Add(1)
	select { // a client's pause before it acts, not a wait for a condition
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(rand.IntN(2000)) * time.Millisecond):
	}
	first, second, two := refundAmounts(fate, r.AmountCents)
	var wg sync.WaitGroup
	refund := func(amount int64) {
		if rk, ans := l.refund(ctx, key, amount); ans.Status == http.StatusAccepted {
			l.followRefund(ctx, key, rk)
		}
	}
	switch {
	case fate == refundRace:
		wg.Go(func() { refund(second) })
		refund(first)
	case two:
		// The second waits for the first's answer, not its end: what
		// remains counts the refunds not rejected.
		rk, ans := l.refund(ctx, key, first)
		wg.Go(func() {
			if ans.Status == http.StatusAccepted {
				l.followRefund(ctx, key, rk)
			}
		})
		refund(second)
	default:
		refund(first)
	}
	wg.Wait()
}

// refund sends a refund of amount (0: all that remains) of transfer id
// under a new key until it gets an answer (sendCommand) and records each
// attempt; it returns the refund's key and its last answer.
func (l *load) refund(ctx context.Context, id string, amount int64) (string, history.Answer) {
	var body []byte
	if amount > 0 {
		body, _ = json.Marshal(map[string]int64{"valorEmCentavos": amount})
	}
	rf := history.Refund{TransferID: id, AmountCents: amount}
	return l.sendCommand(ctx, &l.refundStats.commandStats, id, "/estornos", body, func(invoked time.Time, outcome history.Outcome, key string, ans history.Answer) {
		l.track(key, id, outcome == history.OK && ans.Status != http.StatusAccepted)
		ans.Refund = refundState(ans)
		l.rec.Refund(invoked, outcome, key, rf, ans)
	})
}

// refundBody is a refund's 202 or 200 body.
type refundBody struct {
	TransferID  string `json:"transferenciaId"`
	AmountCents int64  `json:"valorEmCentavos"`
	Status      string `json:"status"`
	Reason      string `json:"motivo"`
}

// refundState is the refund a 202 or 200 answer names; nil for another.
func refundState(ans history.Answer) *history.RefundState {
	if ans.Status != http.StatusAccepted && ans.Status != http.StatusOK {
		return nil
	}
	return &history.RefundState{Status: ans.TransferStatus}
}

// getRefund reads refund key of transfer id through a transfers instance
// and records what it said.
func (l *load) getRefund(ctx context.Context, base, id, key string) (history.Outcome, history.Answer) {
	invoked := time.Now()
	status, b, err := l.fetch(ctx, base+"/transferencias/"+id+"/estornos/"+key)
	outcome, ans := answer(status, b, err)
	if err == nil && status != http.StatusOK && status != http.StatusNotFound {
		outcome = history.Fail // a read that was refused says nothing of the refund
	}
	if status == http.StatusOK {
		var body refundBody
		if json.Unmarshal(b, &body) == nil {
			ans.Refund = &history.RefundState{TransferID: body.TransferID, AmountCents: body.AmountCents, Status: body.Status, Reason: body.Reason}
		}
	}
	l.rec.RefundGet(invoked, outcome, key, history.Refund{TransferID: id}, ans)
	return outcome, ans
}

// followRefund reads refund key of transfer id (paced by readBackoff, for
// at most reservedWithin) until it is LIQUIDADO or REJEITADO; it returns
// whether it read it so.
func (l *load) followRefund(ctx context.Context, id, key string) bool {
	deadline := time.Now().Add(reservedWithin)
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(readBackoff.Delay(attempt)):
		}
		if l.readRefund(ctx, id, key) {
			return true
		}
	}
	return false
}

// readRefund reads refund key of transfer id once and reports whether it
// is over: LIQUIDADO or REJEITADO, or 404 (never created: a key whose
// every try went unanswered).
func (l *load) readRefund(ctx context.Context, id, key string) bool {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o, a := l.getRefund(rctx, l.urls[rand.IntN(len(l.urls))], id, key)
	over := o == history.OK && (a.Status == http.StatusNotFound ||
		a.Refund != nil && (a.Refund.Status == history.RefundSettled || a.Refund.Status == history.RefundRejected))
	l.track(key, id, over)
	return over
}

// readAllRefunds reads every refund the load sent and did not see over
// until it is (followRefund), eight at a time: the history's final reads
// of refunds. It returns how many it could not read so.
func (l *load) readAllRefunds(ctx context.Context) (unread int) {
	l.mu.Lock()
	open := map[string]string{}
	for k, t := range l.refunds {
		if !t.over {
			open[k] = t.transfer
		}
	}
	l.mu.Unlock()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	keys := make([]string, 0, len(open))
	for k := range open {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		id := open[key]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if !l.readRefund(ctx, id, key) && !l.followRefund(ctx, id, key) {
				mu.Lock()
				unread++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return unread
}

// logRefunds logs the refunds' figures; an answer 5xx other than 503
// fails the run.
func (s *suite) logRefunds() {
	st := &s.load.refundStats
	if st.refunded.Load() == 0 && *flagRefunds <= 0 {
		return
	}
	s.t.Logf("refunds: %d settled transfers refunded; POSTs %d: 202 %d, 409 %d, 409 in progress %d, 422 %d, other 4xx %d, 503 %d, conn errors %d, other 5xx %d",
		st.refunded.Load(), st.sent.Load(), st.accepted202.Load(), st.conflict409.Load(), st.inProgress409.Load(), st.refused422.Load(),
		st.other4xx.Load(), st.unavailable503.Load(), st.connErrors.Load(), st.status5xx.Load())
	if st.status5xx.Load() > 0 {
		s.errorf("refunds: %d answers 5xx other than 503", st.status5xx.Load())
	}
}

// refundTopics are the three topics of refunds when the load refunds,
// none otherwise.
func (s *suite) refundTopics() []string {
	if *flagRefunds <= 0 {
		return nil
	}
	return s.topics.Refunds()
}

// ledgerRefundGroup is the ledger's consumer group of estorno.solicitado
// (the ledger's DefaultRefundsGroup).
const ledgerRefundGroup = "ledger-estornos"

// statementAccounts is how many of the load's accounts the run ends with
// statements of.
const statementAccounts = 4

// readStatements reads, once the flow is drained (every balance at an
// instant before now is then final), statements and balances at instants
// of statementAccounts of the load's accounts: a statement from the
// first accepted transfer (less a second) to the middle of the run and
// one from there to now, and the balance at each of the three instants.
// The checker wants each instant's answers to agree and each statement's
// postings to add up.
func (s *suite) readStatements(ctx context.Context) {
	requests, accepted, _ := s.load.snapshot()
	var first, last time.Time
	for _, at := range accepted {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	if first.IsZero() {
		return
	}
	accounts := map[string]bool{}
	for _, r := range requests {
		accounts[r.From], accounts[r.To] = true, true
	}
	names := make([]string, 0, len(accounts))
	for a := range accounts {
		names = append(names, a)
	}
	sort.Strings(names)
	names = names[:min(len(names), statementAccounts)]
	from := first.Add(-time.Second)
	instants := []time.Time{from, first.Add(last.Sub(first) / 2), time.Now().Add(-time.Second)}
	ledger := s.procs["ledger"].url()
	for _, a := range names {
		prev := time.Time{}
		for _, at := range instants {
			s.balanceAt(ctx, ledger, a, at)
			if !prev.IsZero() {
				s.statement(ctx, ledger, a, prev, at)
			}
			prev = at
		}
	}
}

// instant is t as the run sends it: RFC 3339 in UTC, to the microsecond
// (what PostgreSQL keeps).
func instant(t time.Time) string { return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano) }

// balanceAt reads GET /contas/{account}/saldo?em=at and records it.
func (s *suite) balanceAt(ctx context.Context, ledger, account string, at time.Time) {
	b := history.BalanceAt{Account: account, At: instant(at)}
	invoked := time.Now()
	status, body, err := s.load.fetch(ctx, ledger+"/contas/"+url.PathEscape(account)+"/saldo?em="+url.QueryEscape(b.At))
	outcome, ans := readOutcome(status, err)
	if status == http.StatusOK {
		var v struct {
			Cents int64 `json:"saldoEmCentavos"`
		}
		if jerr := json.Unmarshal(body, &v); jerr != nil {
			s.errorf("saldo of %s at %s: %v", account, b.At, jerr)
		}
		b.Cents = v.Cents
	}
	s.rec.BalanceAt(invoked, outcome, b, ans)
}

// statement reads GET /contas/{account}/extrato for [from, to) as JSON and
// records it.
func (s *suite) statement(ctx context.Context, ledger, account string, from, to time.Time) {
	st := history.Statement{Account: account, From: instant(from), To: instant(to)}
	q := url.Values{"desde": {st.From}, "ate": {st.To}, "formato": {"json"}}
	invoked := time.Now()
	status, body, err := s.load.fetch(ctx, ledger+"/contas/"+url.PathEscape(account)+"/extrato?"+q.Encode())
	outcome, ans := readOutcome(status, err)
	if status == http.StatusOK {
		var v struct {
			Opening int64 `json:"saldoInicialEmCentavos"`
			Closing int64 `json:"saldoFinalEmCentavos"`
			Items   []struct {
				ID         int64  `json:"id"`
				TransferID string `json:"transferenciaId"`
				RefundID   string `json:"estornoId"`
				Type       string `json:"tipo"`
				Cents      int64  `json:"valorEmCentavos"`
				After      int64  `json:"saldoAposEmCentavos"`
			} `json:"itens"`
		}
		if jerr := json.Unmarshal(body, &v); jerr != nil {
			s.errorf("statement of %s for %s..%s: %v", account, st.From, st.To, jerr)
		}
		st.OpeningCents, st.ClosingCents = v.Opening, v.Closing
		for _, it := range v.Items {
			st.Items = append(st.Items, history.StatementItem{ID: strconv.FormatInt(it.ID, 10), Type: it.Type, Cents: it.Cents,
				TransferID: it.TransferID, RefundID: it.RefundID, After: it.After})
		}
	}
	s.rec.Statement(invoked, outcome, st, ans)
}

// readOutcome is a read's outcome: a 200 is known, no answer unknown, any
// other answer a refusal that says nothing.
func readOutcome(status int, err error) (history.Outcome, history.Answer) {
	switch {
	case err != nil:
		return history.Info, history.Answer{Error: err.Error()}
	case status == http.StatusOK:
		return history.OK, history.Answer{Status: status}
	}
	return history.Fail, history.Answer{Status: status}
}

// checkRefundStores checks the stores' own invariants of refunds by SQL,
// once the flow is drained: no refund still being decided by the ledger
// nor PENDENTE in the transfers service, no transfer refunded beyond what
// the ledger settled for it (a captured hold's captured amount), and the
// transfers service's valorEstornadoEmCentavos the ledger's settled
// refunds. It returns how many refunds the ledger decided (each one
// notification).
func (s *suite) checkRefundStores(ctx context.Context, report func(format string, args ...any)) (decided int) {
	if *flagRefunds <= 0 {
		return 0
	}
	var deciding, over, pending int
	if err := s.ledger.QueryRow(ctx, `SELECT count(*) FROM refund WHERE result IN ('LIQUIDADO', 'REJEITADO')`).Scan(&decided); err != nil {
		s.t.Fatal(err)
	}
	if err := s.ledger.QueryRow(ctx, `SELECT count(*) FROM refund WHERE result = 'EM_PROCESSAMENTO'`).Scan(&deciding); err != nil {
		s.t.Fatal(err)
	}
	if err := s.ledger.QueryRow(ctx, `
SELECT count(*) FROM (SELECT transfer_id, sum(amount_cents) AS refunded FROM refund WHERE result = 'LIQUIDADO' GROUP BY transfer_id) r
  JOIN processed_transfer m ON m.transfer_id = r.transfer_id
  LEFT JOIN reservation v ON v.transfer_id = r.transfer_id
 WHERE r.refunded > coalesce(v.captured_cents, m.amount_cents)`).Scan(&over); err != nil {
		s.t.Fatal(err)
	}
	if err := s.transfer.QueryRow(ctx, `SELECT count(*) FROM estorno WHERE status = 'PENDENTE'`).Scan(&pending); err != nil {
		s.t.Fatal(err)
	}
	if deciding+over+pending > 0 {
		report("refunds: %d still EM_PROCESSAMENTO in the ledger, %d transfers refunded beyond what was settled, %d still PENDENTE", deciding, over, pending)
	}
	settled := map[string]int64{}
	rows, err := s.ledger.Query(ctx, `SELECT transfer_id::text, sum(amount_cents) FROM refund WHERE result = 'LIQUIDADO' GROUP BY transfer_id`)
	if err != nil {
		s.t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var cents int64
		if err := rows.Scan(&id, &cents); err != nil {
			s.t.Fatal(err)
		}
		settled[id] = cents
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	rows, err = s.transfer.Query(ctx, `SELECT id::text, valor_estornado_centavos FROM transferencia WHERE valor_estornado_centavos > 0`)
	if err != nil {
		s.t.Fatal(err)
	}
	var differ []string
	for rows.Next() {
		var id string
		var cents int64
		if err := rows.Scan(&id, &cents); err != nil {
			s.t.Fatal(err)
		}
		if settled[id] != cents {
			differ = append(differ, fmt.Sprintf("%s %d (the ledger settled %d)", id, cents, settled[id]))
		}
		delete(settled, id)
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	for id, cents := range settled {
		differ = append(differ, fmt.Sprintf("%s 0 (the ledger settled %d)", id, cents))
	}
	if len(differ) > 0 {
		sort.Strings(differ)
		report("refunds: %d transfers whose valorEstornadoEmCentavos is not the ledger's settled refunds, e.g. %s", len(differ), differ[0])
	}
	return decided
}

// injectRefundRejected rejects a refund the ledger settled, as a broken
// ledger deciding one refund twice would: it writes an EstornoRejeitado
// (motivo SALDO_INSUFICIENTE, its derived event id, so consumers take it
// as the ledger's) into the ledger's outbox for a settled refund of the
// load's, and waits for the relay to publish it and every group to
// consume it (the projection changes nothing: the refund is no longer
// PENDENTE). The checker must report exactly one refund-status on that
// refund. It runs after the stores' checks, which would count its
// webhook.
func (s *suite) injectRefundRejected() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var refund, transfer uuid.UUID
	var source string
	if err := s.ledger.QueryRow(ctx, `SELECT refund_id, transfer_id, source_account FROM refund WHERE result = 'LIQUIDADO' ORDER BY refund_id LIMIT 1`).
		Scan(&refund, &transfer, &source); err != nil {
		s.t.Fatalf("inject: a settled refund: %v", err)
	}
	ev := events.RefundRejected{EventID: events.DerivedID(events.KindRefundRejected, refund), RefundID: refund, TransferID: transfer,
		Reason: events.ReasonInsufficientFunds, OccurredAt: time.Now().UTC()}
	s.publishAsLedger(ctx, "the rejection of refund "+refund.String(), ev.EventID, "refund", refund, s.topics.RefundRejected, source,
		events.TypeRefundRejected, ev)
	s.injected = append(s.injected, history.Anomaly{Kind: history.RefundStatus, About: refund.String()})
	s.t.Logf("inject: settled refund %s rejected too (EstornoRejeitado %s); the checker must report one %s on it",
		refund, ev.EventID, history.RefundStatus)
}
