package history

import (
	"fmt"
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
)

// AnomalyKinds lists every kind, in the order the report prints them.
var AnomalyKinds = []string{NotTerminal, TwoTerminal, StaleRead, Idempotency, BankSum, BankDeposits,
	BankNegative, StrayPosting, LostPosting, LostRecord, OutOfOrder, DuplicateWebhook}

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
}

// Report is what Check found.
type Report struct {
	Anomalies  []Anomaly
	Explained  []ExplainedDuplicate
	Figures    Figures
	Undecided  []string // keys porcupine could not decide in time (not anomalies, not proofs)
	checkedFor time.Duration
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
	byCrash := map[string]int{}
	for _, e := range r.Explained {
		byCrash[e.Crash]++
	}
	crashes := make([]string, 0, len(byCrash))
	for c := range byCrash {
		crashes = append(crashes, c)
	}
	sort.Strings(crashes)
	for _, c := range crashes {
		fmt.Fprintf(&b, "allowed duplicate webhooks explained by %q: %d\n", c, byCrash[c])
	}
	if len(r.Undecided) > 0 {
		fmt.Fprintf(&b, "keys porcupine could not decide: %d\n", len(r.Undecided))
	}
	f := r.Figures
	fmt.Fprintf(&b, "ops %d (ok %d, fail %d, info %d): %d POSTs, %d GETs, %d transfers accepted, %d snapshots, "+
		"%d records published, %d consumed, %d webhooks, %d crashes; checked in %s\n",
		f.Ops, f.OK, f.Fail, f.Info, f.Posts, f.Gets, f.Transfers, f.Snapshots, f.Published, f.Consumed,
		f.Webhooks, f.Crashes, r.checkedFor.Round(time.Millisecond))
	return b.String()
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
	add(checkReads(h))
	reg, undecided := checkRegisters(h)
	add(reg)
	rep.Undecided = undecided
	add(checkBank(h))
	add(checkRecords(h))
	dup, explained := checkWebhooks(h)
	add(dup)
	rep.Explained = explained
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
		case KindWebhook:
			ok = op.Webhook != nil
		case KindCrash:
			ok = op.Crash != nil
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
	accepted := map[string]bool{}
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
	f.Transfers = len(accepted)
	return f
}

// accepted202 reports a POST answered 202.
func accepted202(op Op) bool {
	return op.Kind == KindPost && op.Outcome == OK && op.Answer.Status == 202
}
