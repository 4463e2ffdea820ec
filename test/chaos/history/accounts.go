package history

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"
)

// requestBodies returns, per transfer id (its Idempotency-Key), the bodies
// a POST may have created it with: those answered 202 first, then those
// of unknown outcome. A refused POST (Fail, or a final 4xx) created
// nothing and is left out.
func requestBodies(h History) map[string][]Transfer {
	accepted, unknown := map[string][]Transfer{}, map[string][]Transfer{}
	add := func(m map[string][]Transfer, key string, b Transfer) {
		for _, have := range m[key] {
			if have == b {
				return
			}
		}
		m[key] = append(m[key], b)
	}
	for _, op := range h {
		switch {
		case accepted202(op):
			add(accepted, op.Key, *op.Transfer)
		case op.Kind == KindPost && op.Outcome == Info:
			add(unknown, op.Key, *op.Transfer)
		}
	}
	out := accepted
	for k, bs := range unknown {
		for _, b := range bs {
			add(out, k, b)
		}
	}
	return out
}

// checkReadBodies finds reads answered 200 whose body is not what a
// client asked for under that id: another id, or accounts, amount or
// currency of no accepted (or possibly accepted) request of the key.
func checkReadBodies(h History) []Anomaly {
	bodies := requestBodies(h)
	var out []Anomaly
	reported := map[string]bool{}
	for _, op := range h {
		if op.Kind != KindGet || op.Outcome != OK || op.Answer.Status != http.StatusOK || reported[op.Key] {
			continue
		}
		at := op.Invoke.UTC().Format(time.RFC3339Nano)
		var why string
		switch got := op.Answer.Transfer; {
		case op.Answer.ID != op.Key:
			why = fmt.Sprintf("read %s answered the transfer %q", at, op.Answer.ID)
		case got == nil:
			why = fmt.Sprintf("read %s answered 200 without the transfer's accounts and amount", at)
		case len(bodies[op.Key]) == 0:
			// A transfer no client asked for: stray-posting and the
			// transfers checks report it; the read's body has nothing to match.
		case !matchesAny(bodies[op.Key], *got):
			why = fmt.Sprintf("read %s answered %s, the request was %s", at, describeTransfer(*got), describeTransfer(bodies[op.Key][0]))
		}
		if why != "" {
			reported[op.Key] = true
			out = append(out, Anomaly{ReadBody, op.Key, why})
		}
	}
	return out
}

// matchesAny reports a read's body that one of the requests asked: the
// same accounts, amount and currency and, where the read says them, the
// same captura and (when the request named one) the same instant of
// expiraEm. A read of a hold shows its expiry however the ledger formats
// it, and the default when the request named none.
func matchesAny(list []Transfer, got Transfer) bool {
	for _, b := range list {
		switch {
		case b.From != got.From || b.To != got.To || b.AmountCents != got.AmountCents || b.Currency != got.Currency:
		case got.Capture != "" && b.Hold() != got.Hold():
		case got.ExpiresAt != "" && b.ExpiresAt != "" && !sameInstant(b.ExpiresAt, got.ExpiresAt):
		default:
			return true
		}
	}
	return false
}

func sameInstant(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	return errA == nil && errB == nil && ta.Equal(tb)
}

func describeTransfer(t Transfer) string {
	s := fmt.Sprintf("%d %s from %s to %s", t.AmountCents, t.Currency, t.From, t.To)
	if t.Hold() {
		s += " as a hold"
		if t.ExpiresAt != "" {
			s += " expiring " + t.ExpiresAt
		}
	}
	return s
}

// checkAccounts runs the per-account model on every snapshot: each
// account's balance must be exactly what its deposits and the accepted
// request bodies of the transfers with postings in that snapshot give.
// The model is checked in its two halves, so that a difference is
// reported as its cause: each entry against what was asked (a transfer's
// postings debit the request's source and credit its destination with
// its amount, a deposit's debit its currency's funding account and
// credit the deposit's account: PostingAccount, PostingAmount), and each
// account's balance against the sum of its postings (BalancePostings).
// Both hold exactly when every balance equals the model. Entries no
// client asked for are checkBank's stray postings. A hold's postings are
// its capture's: the amount one of its capture commands asked (postings of
// a hold no capture asked for, or beyond what it reserved, are the hold
// checks'). Each kind is reported once per entry or account, at the first
// snapshot that shows it.
func checkAccounts(h History) []Anomaly {
	bodies := requestBodies(h)
	holds := holdsAsked(h)
	refunds := refundsOf(h)
	deposits := map[string]Deposit{}
	for _, op := range h {
		if op.Kind == KindDeposit && op.Outcome != Fail {
			deposits[op.Key] = *op.Deposit
		}
	}
	var snaps []Op
	for _, op := range h {
		if op.Kind == KindSnapshot {
			snaps = append(snaps, op)
		}
	}
	sort.SliceStable(snaps, func(i, j int) bool { return snaps[i].Invoke.Before(snaps[j].Invoke) })

	var out []Anomaly
	reported := map[string]bool{}
	report := func(a Anomaly) {
		if k := a.Kind + " " + a.About; !reported[k] {
			reported[k] = true
			out = append(out, a)
		}
	}
	for _, s := range snaps {
		at := "snapshot " + s.Invoke.UTC().Format(time.RFC3339Nano)
		currency, funding := map[string]string{}, map[string]string{} // account -> currency; currency -> funding account
		for _, b := range s.Snapshot.Balances {
			currency[b.Account] = b.Currency
			if b.Funding {
				funding[b.Currency] = b.Account
			}
		}
		posted := map[string]int64{}
		for _, e := range s.Snapshot.Entries {
			posted[e.Debit] -= e.DebitCents
			posted[e.Credit] += e.CreditCents
			// What was asked: the accounts, the currency and the amount.
			var from, to, cur string
			var cents int64
			judgeAmount := true
			switch e.Type {
			case EntryTransfer:
				cands := bodies[e.ID]
				if len(cands) == 0 {
					continue // a stray posting
				}
				hold := holds[e.ID]
				b := cands[0]
				for _, c := range cands {
					if c.From == e.Debit && c.To == e.Credit && hold.moves(c, e.DebitCents) && hold.moves(c, e.CreditCents) {
						b = c
						break
					}
				}
				from, to, cur, cents = b.From, b.To, b.Currency, b.AmountCents
				if b.Hold() {
					cents, judgeAmount = hold.captured(e)
				}
			case EntryRefund:
				// A refund returns what it asked (all that remains when it
				// named no amount: the refund checks judge that) from the
				// transfer's destination to its source.
				ri, cands := refunds[e.ID], bodies[e.TransferID]
				if ri == nil || len(ri.asked) == 0 || len(cands) == 0 || e.Postings > 2 {
					continue // stray or posted twice: the refund checks'
				}
				b := cands[0]
				for _, c := range cands {
					if c.To == e.Debit && c.From == e.Credit {
						b = c
						break
					}
				}
				from, to, cur = b.To, b.From, b.Currency
				cents, judgeAmount = ri.asked[0], !slices.Contains(ri.asked, 0)
				if slices.Contains(ri.asked, e.DebitCents) {
					cents = e.DebitCents
				}
			case EntryDeposit:
				d, ok := deposits[e.ID]
				if !ok {
					continue // a stray posting
				}
				from, to, cur, cents = funding[d.Currency], d.Account, d.Currency, d.AmountCents
				if from == "" {
					from = "the funding account of " + d.Currency
				}
			default:
				report(Anomaly{PostingAccount, e.ID, fmt.Sprintf("entry of unknown type %q (%s)", e.Type, at)})
				continue
			}
			what := func() string {
				return fmt.Sprintf("%s %s asked %d %s from %s to %s; its postings debit %d from %q, credit %d to %q (%s)",
					lower(e.Type), e.ID, cents, cur, from, to, e.DebitCents, e.Debit, e.CreditCents, e.Credit, at)
			}
			switch {
			case e.Debit == "" || e.Credit == "":
				report(Anomaly{PostingAmount, e.ID, what()}) // a side without its posting
			case e.Debit != from || e.Credit != to || currency[e.Debit] != cur || currency[e.Credit] != cur:
				report(Anomaly{PostingAccount, e.ID, what()})
			case judgeAmount && (e.DebitCents != cents || e.CreditCents != cents):
				report(Anomaly{PostingAmount, e.ID, what()})
			}
		}
		balance := map[string]int64{}
		for _, b := range s.Snapshot.Balances {
			balance[b.Account] = b.Cents
		}
		accounts := map[string]bool{}
		for a := range balance {
			accounts[a] = true
		}
		for a := range posted {
			if a != "" { // the empty account of a missing side holds 0
				accounts[a] = true
			}
		}
		for _, a := range sortedKeys(accounts) {
			got, known := balance[a]
			switch {
			case !known:
				report(Anomaly{BalancePostings, a, fmt.Sprintf("postings summing to %d on an account with no balance (%s)", posted[a], at)})
			case got != posted[a]:
				report(Anomaly{BalancePostings, a, fmt.Sprintf("holds %d, its postings sum to %d (%s)", got, posted[a], at)})
			}
		}
	}
	return out
}

func lower(entryType string) string {
	switch entryType {
	case EntryDeposit:
		return "deposit"
	case EntryRefund:
		return "refund"
	}
	return "transfer"
}
