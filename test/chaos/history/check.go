package history

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Anomaly kinds, each a way a history can show a broken guarantee.
const (
	// NotTerminal: a transfer answered 202 that no read ever saw LIQUIDADA
	// or REJEITADA (a run ends with a read of every accepted transfer).
	NotTerminal = "not-terminal"
	// TwoTerminal: a transfer seen LIQUIDADA and REJEITADA (by reads, by
	// the result events published for it, or read REJEITADA with postings).
	TwoTerminal = "two-terminal"
	// StaleRead: a read that contradicts one that completed before it was
	// invoked (LIQUIDADA then 404, PENDENTE or REJEITADA; a 202 then 404).
	StaleRead = "stale-read"
	// Idempotency: the answers to one Idempotency-Key are not those of one
	// register that the first accepted body wins.
	Idempotency = "idempotency"
	// BankSum: a snapshot in which a currency's balances, funding accounts
	// included, do not sum to zero.
	BankSum = "bank-sum"
	// BankDeposits: a snapshot in which a currency's customer balances do
	// not sum to the deposits made.
	BankDeposits = "bank-deposits"
	// BankNegative: a snapshot with a negative customer balance.
	BankNegative = "bank-negative"
	// BalancePostings, PostingAccount and PostingAmount are the per-account
	// model's findings (checkAccounts): an account's balance must be what
	// its deposits and the accepted requests with postings give.
	//
	// BalancePostings: an account whose balance in a snapshot differs from
	// the sum of its postings in that snapshot (a balance moved twice, or
	// by another amount than its postings).
	BalancePostings = "balance-postings"
	// PostingAccount: an entry whose postings debit or credit another
	// account than the accepted request (or deposit) names: the wrong
	// counterparty, the wrong source, an account of another currency.
	PostingAccount = "posting-account"
	// PostingAmount: an entry whose debit or credit is not the accepted
	// request's (or deposit's) amount, or lacks one side.
	PostingAmount = "posting-amount"
	// ReadBody: a GET answered 200 whose body (id, accounts, amount,
	// currency) is not the accepted request's.
	ReadBody = "read-body"
	// StrayPosting: postings of a transfer the API never accepted (no 202
	// and no unknown outcome for its key), or of an unknown deposit.
	StrayPosting = "stray-posting"
	// LostPosting: a transfer read LIQUIDADA before a snapshot began that
	// has no postings in it, or postings gone from a later snapshot.
	LostPosting = "lost-posting"
	// LostRecord: a record a relay marked published that a consumer group
	// of its topic never consumed.
	LostRecord = "lost-record"
	// OutOfOrder: a group consumed an account's events of one topic in an
	// order other than their outbox's.
	OutOfOrder = "out-of-order"
	// DuplicateWebhook: an event id delivered twice with no crash to
	// explain it.
	DuplicateWebhook = "duplicate-webhook"
	// Vacuous: the history lacks what a check needs to mean anything (no
	// accepted transfer, no read, no snapshot with postings, no record),
	// or a fault's window lacks what its Expect names.
	Vacuous = "vacuous"
)

// AnomalyKinds lists every kind, in the order the report prints them.
var AnomalyKinds = []string{NotTerminal, TwoTerminal, StaleRead, ReadBody, Idempotency, BankSum, BankDeposits,
	BankNegative, BalancePostings, PostingAccount, PostingAmount, StrayPosting, LostPosting,
	LostRecord, OutOfOrder, DuplicateWebhook, ReservedRange, ReservedOpen, ReleasedTwice, OverCapture, HoldPosting,
	HoldStatus, CommandNotReserved, OverRefund, RefundTwice, RefundStatus, RunningBalance, StatementSum, Vacuous}

// Anomaly is one broken guarantee: its kind, what it is about (a key, an
// event id, a snapshot's time) and what was seen.
type Anomaly struct {
	Kind   string
	About  string
	Detail string
}

func (a Anomaly) String() string { return a.Kind + " " + a.About + ": " + a.Detail }

// ExplainedDuplicate is a webhook delivered twice, allowed because a crash
// may have interrupted the first delivery's record.
type ExplainedDuplicate struct {
	EventID string
	Crash   string
}

// Figures are the counts of a run.
type Figures struct {
	Ops, OK, Fail, Info int
	Posts, Gets         int
	Transfers           int // keys answered 202
	Snapshots           int
	Published, Consumed int
	Webhooks, Crashes   int
	// Holds are the transfers accepted as holds; Captures and Cancels the
	// command keys answered 202.
	Holds, Captures, Cancels int
	// Refunds are the refund keys answered 202, RefundsSettled and
	// RefundsRejected those read LIQUIDADO and REJEITADO; Statements the
	// statements answered 200.
	Refunds, RefundsSettled, RefundsRejected, Statements int
}

// Report is what Check found.
type Report struct {
	Anomalies  []Anomaly
	Explained  []ExplainedDuplicate
	Figures    Figures
	Windows    []Window // each fault's window and what it held
	Undecided  []string // keys porcupine could not decide in time (not anomalies, not proofs)
	checkedFor time.Duration
	// ExplainedReads are the stale reads an unfenced former primary
	// explains (KindUnfenced).
	ExplainedReads []ExplainedStaleRead
}

// OK reports a run without anomalies.
func (r Report) OK() bool { return len(r.Anomalies) == 0 }

// Count returns the anomalies of kind.
func (r Report) Count(kind string) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Kind == kind {
			n++
		}
	}
	return n
}

// Table prints the anomalies by kind (0 is the goal), a few examples of
// each, the crashes that explain allowed duplicates, and the figures.
func (r Report) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "anomaly\tcount\n")
	for _, k := range AnomalyKinds {
		fmt.Fprintf(tw, "%s\t%d\n", k, r.Count(k))
	}
	_ = tw.Flush()
	for _, k := range AnomalyKinds {
		n := 0
		for _, a := range r.Anomalies {
			if a.Kind == k && n < 5 {
				fmt.Fprintf(&b, "  %s\n", a)
				n++
			}
		}
	}
	crashes := make([]string, 0, len(r.Explained))
	for _, e := range r.Explained {
		crashes = append(crashes, e.Crash)
	}
	countBy(&b, "allowed duplicate webhooks explained by %q: %d\n", crashes)
	faults := make([]string, 0, len(r.ExplainedReads))
	for _, e := range r.ExplainedReads {
		faults = append(faults, e.Fault)
	}
	countBy(&b, "allowed stale reads explained by an unfenced former primary in %q: %d\n", faults)
	if len(r.Undecided) > 0 {
		fmt.Fprintf(&b, "keys porcupine could not decide: %d\n", len(r.Undecided))
	}
	if len(r.Windows) > 0 {
		fmt.Fprintf(&b, "fault windows (snapshots, reads answered, POSTs of unknown outcome, POSTs in flight at the start; * expected):\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		mark := func(n int, want bool) string {
			if want {
				return fmt.Sprintf("%d*", n)
			}
			return fmt.Sprint(n)
		}
		for _, w := range r.Windows {
			e := w.Expect
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", w.Crash, w.To.Sub(w.From).Round(time.Millisecond),
				mark(w.Snapshots, e.Snapshots), mark(w.Reads, e.Reads), mark(w.UnknownPosts, e.UnknownPosts), mark(w.WritesInFlight, e.WritesInFlight))
		}
		_ = tw.Flush()
	}
	f := r.Figures
	fmt.Fprintf(&b, "ops %d (ok %d, fail %d, info %d): %d POSTs, %d GETs, %d transfers accepted, %d snapshots, "+
		"%d records published, %d consumed, %d webhooks, %d crashes; checked in %s\n",
		f.Ops, f.OK, f.Fail, f.Info, f.Posts, f.Gets, f.Transfers, f.Snapshots, f.Published, f.Consumed,
		f.Webhooks, f.Crashes, r.checkedFor.Round(time.Millisecond))
	if f.Holds > 0 {
		fmt.Fprintf(&b, "holds: %d accepted, %d captures and %d cancellations answered 202\n", f.Holds, f.Captures, f.Cancels)
	}
	if f.Refunds > 0 || f.Statements > 0 {
		fmt.Fprintf(&b, "refunds: %d answered 202, %d read LIQUIDADO, %d read REJEITADO; %d statements\n",
			f.Refunds, f.RefundsSettled, f.RefundsRejected, f.Statements)
	}
	return b.String()
}

// countBy prints format with each distinct name (sorted) and how many
// times names holds it: what explains the allowed oddities, by fault.
func countBy(b *strings.Builder, format string, names []string) {
	by := map[string]int{}
	for _, n := range names {
		by[n]++
	}
	distinct := make([]string, 0, len(by))
	for n := range by {
		distinct = append(distinct, n)
	}
	sort.Strings(distinct)
	for _, n := range distinct {
		fmt.Fprintf(b, format, n, by[n])
	}
}

// Check judges a history. It returns an error when the history is
// malformed (an operation without its kind's fields) or when porcupine
// could not decide some key in time; anomalies are in the report, and a
// run with any anomaly has failed.
func Check(h History) (Report, error) {
	began := time.Now()
	var rep Report
	if err := validate(h); err != nil {
		return rep, err
	}
	rep.Figures = figures(h)
	add := func(a []Anomaly) { rep.Anomalies = append(rep.Anomalies, a...) }
	reads, explainedReads := checkReads(h)
	add(reads)
	rep.ExplainedReads = explainedReads
	reg, undecided := checkRegisters(h)
	add(reg)
	rep.Undecided = undecided
	add(checkReadBodies(h))
	add(checkBank(h))
	add(checkAccounts(h))
	add(checkRecords(h))
	dup, explained := checkWebhooks(h)
	add(dup)
	rep.Explained = explained
	add(checkHolds(h))
	add(checkRefunds(h))
	add(checkRunningBalances(h))
	add(checkStatements(h))
	add(checkMinimums(h))
	rep.Windows = windows(h)
	rep.checkedFor = time.Since(began)
	if len(undecided) > 0 {
		return rep, fmt.Errorf("porcupine could not decide %d keys in time, e.g. %s", len(undecided), undecided[0])
	}
	return rep, nil
}

func validate(h History) error {
	for i, op := range h {
		var ok bool
		switch op.Kind {
		case KindPost:
			ok = op.Transfer != nil && op.Answer != nil && op.Key != ""
		case KindGet:
			ok = op.Answer != nil && op.Key != ""
		case KindDeposit:
			ok = op.Deposit != nil && op.Key != ""
		case KindSnapshot:
			ok = op.Snapshot != nil
		case KindPublished, KindConsumed:
			ok = op.Record != nil
		case KindSubscribed:
			ok = op.Record != nil && op.Record.Topic != "" && op.Record.Group != ""
		case KindWebhook:
			ok = op.Webhook != nil
		case KindCrash:
			ok = op.Crash != nil
		case KindUnfenced:
			ok = op.Unfenced != nil && len(op.Unfenced.Databases) > 0
		case KindCapture, KindCancel:
			ok = op.Command != nil && op.Answer != nil && op.Key != "" && op.Command.TransferID != ""
		case KindRefund, KindRefundGet:
			ok = op.Refund != nil && op.Answer != nil && op.Key != "" && op.Refund.TransferID != ""
		case KindStatement:
			ok = op.Statement != nil && op.Answer != nil && op.Statement.Account != ""
		case KindBalanceAt:
			ok = op.BalanceAt != nil && op.Answer != nil && op.BalanceAt.Account != ""
		case KindMix:
			ok = op.Key != ""
		}
		if !ok {
			return fmt.Errorf("history op %d: kind %q without its fields", i, op.Kind)
		}
		if op.Outcome != OK && op.Outcome != Fail && op.Outcome != Info {
			return fmt.Errorf("history op %d: outcome %q", i, op.Outcome)
		}
	}
	return nil
}

func figures(h History) Figures {
	var f Figures
	accepted, holds := map[string]bool{}, map[string]bool{}
	captures, cancels := map[string]bool{}, map[string]bool{}
	refunds, refundReads := map[string]bool{}, map[string]string{}
	for _, op := range h {
		f.Ops++
		switch op.Outcome {
		case OK:
			f.OK++
		case Fail:
			f.Fail++
		case Info:
			f.Info++
		}
		switch op.Kind {
		case KindPost:
			f.Posts++
			if accepted202(op) {
				accepted[op.Key] = true
				if op.Transfer.Hold() {
					holds[op.Key] = true
				}
			}
		case KindCapture:
			captures[op.Key] = captures[op.Key] || commandAccepted(op)
		case KindCancel:
			cancels[op.Key] = cancels[op.Key] || commandAccepted(op)
		case KindRefund:
			refunds[op.Key] = refunds[op.Key] || refundAccepted(op)
		case KindRefundGet:
			if refundRead(op) {
				refundReads[op.Key] = op.Answer.Refund.Status
			}
		case KindStatement:
			if op.Outcome == OK && op.Answer.Status == http.StatusOK {
				f.Statements++
			}
		case KindGet:
			f.Gets++
		case KindSnapshot:
			f.Snapshots++
		case KindPublished:
			f.Published++
		case KindConsumed:
			f.Consumed++
		case KindWebhook:
			f.Webhooks++
		case KindCrash:
			f.Crashes++
		}
	}
	f.Transfers, f.Holds = len(accepted), len(holds)
	for _, ok := range captures {
		if ok {
			f.Captures++
		}
	}
	for _, ok := range cancels {
		if ok {
			f.Cancels++
		}
	}
	for _, ok := range refunds {
		if ok {
			f.Refunds++
		}
	}
	for _, st := range refundReads {
		switch st {
		case RefundSettled:
			f.RefundsSettled++
		case RefundRejected:
			f.RefundsRejected++
		}
	}
	return f
}

// accepted202 reports a POST answered 202.
func accepted202(op Op) bool {
	return op.Kind == KindPost && op.Outcome == OK && op.Answer.Status == 202
}
