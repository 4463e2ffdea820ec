package history

import (
	"net/http"
	"sort"
	"time"
)

// The anomaly kinds of the client's history (CONTRACTS section 11).
const (
	// RunningBalance: in a snapshot, an account whose postings' running
	// balances do not chain (each the one before plus its own amount, the
	// first its own amount) or whose last running balance is not its
	// balance.
	RunningBalance = "running-balance"
	// StatementSum: a statement whose opening plus its postings is not its
	// closing, whose running balances do not chain from its opening, that
	// lists a posting twice, or two answers for one account's balance at
	// one instant (a statement's opening at desde or closing at ate, a
	// /saldo?em=) that differ.
	StatementSum = "statement"
)

// Statement is a GET /contas/{id}/extrato: the range asked (desde, ate as
// sent) and, answered 200, the opening and closing balances and the
// postings, oldest first.
type Statement struct {
	Account      string          `json:"account"`
	From         string          `json:"desde"`
	To           string          `json:"ate"`
	OpeningCents int64           `json:"openingCents"`
	ClosingCents int64           `json:"closingCents"`
	Items        []StatementItem `json:"items,omitempty"`
}

// StatementItem is one posting of a statement (as in /lancamentos).
type StatementItem struct {
	ID         string `json:"id"`
	Type       string `json:"tipo"` // "D" or "C"
	Cents      int64  `json:"cents"`
	TransferID string `json:"transferId,omitempty"`
	RefundID   string `json:"refundId,omitempty"`
	After      int64  `json:"after"` // saldoAposEmCentavos
}

// signed returns the item's amount as it moves the balance.
func (it StatementItem) signed() int64 {
	if it.Type == "D" {
		return -it.Cents
	}
	return it.Cents
}

// BalanceAt is a GET /contas/{id}/saldo?em=: the instant asked (as sent)
// and, answered 200, the balance.
type BalanceAt struct {
	Account string `json:"account"`
	At      string `json:"em"`
	Cents   int64  `json:"cents"`
}

// checkRunningBalances judges the running balances each snapshot read
// (Snapshot.Postings): per account, ordered by Seq, each posting's
// balance after it is the one before plus its amount (from 0), and the
// last is the account's balance. One anomaly per account.
func checkRunningBalances(h History) []Anomaly {
	f := &findings{seen: map[string]bool{}}
	for _, s := range sortedSnapshots(h) {
		if len(s.Snapshot.Postings) == 0 {
			continue
		}
		at := "snapshot " + stamp(s.Invoke)
		chains := map[string][]Posting{}
		for _, p := range s.Snapshot.Postings {
			chains[p.Account] = append(chains[p.Account], p)
		}
		balance := map[string]int64{}
		for _, b := range s.Snapshot.Balances {
			balance[b.Account] = b.Cents
		}
		for _, a := range sortedKeys(chains) {
			c := chains[a]
			sort.Slice(c, func(i, j int) bool { return c[i].Seq < c[j].Seq })
			var prev int64
			for i, p := range c {
				switch {
				case i > 0 && p.Seq == c[i-1].Seq:
					f.add(RunningBalance, a, "two postings numbered %d (%s)", p.Seq, at)
				case p.After != prev+p.Cents:
					f.add(RunningBalance, a, "posting %d of %s moves %d after a running balance of %d, its own says %d (%s)",
						p.Seq, p.Entry, p.Cents, prev, p.After, at)
				}
				prev = p.After
			}
			if b, ok := balance[a]; ok && prev != b {
				f.add(RunningBalance, a, "its last posting's running balance is %d, its balance %d (%s)", prev, b, at)
			}
		}
	}
	return f.out
}

// checkStatements judges each statement answered 200: opening plus its
// postings is its closing, each posting's running balance chains from the
// opening, no posting twice; and every answer for one account's balance
// at one instant (a statement's opening at desde and closing at ate, a
// /saldo?em= read) is the same. A run reads these for instants before
// anything it had in flight, so that the balance at each is settled.
func checkStatements(h History) []Anomaly {
	f := &findings{seen: map[string]bool{}}
	type claim struct {
		cents int64
		what  string
	}
	claims := map[string][]claim{} // account and instant -> what each answer said
	instant := func(account, at string) string {
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			at = stamp(t)
		}
		return account + " at " + at
	}
	for _, op := range h {
		switch {
		case op.Kind == KindStatement && op.Outcome == OK && op.Answer.Status == http.StatusOK:
			s := op.Statement
			about := s.Account + " " + s.From + ".." + s.To
			sum, ids := s.OpeningCents, map[string]bool{}
			for _, it := range s.Items {
				sum += it.signed()
				switch {
				case ids[it.ID]:
					f.add(StatementSum, about, "lists the posting %s twice (read at %s)", it.ID, stamp(op.Invoke))
				case it.After != sum:
					f.add(StatementSum, about, "posting %s's running balance is %d, the opening plus the postings up to it %d (read at %s)",
						it.ID, it.After, sum, stamp(op.Invoke))
				}
				ids[it.ID] = true
			}
			if sum != s.ClosingCents {
				f.add(StatementSum, about, "opening %d plus %d postings is %d, its closing %d (read at %s)",
					s.OpeningCents, len(s.Items), sum, s.ClosingCents, stamp(op.Invoke))
			}
			what := "the statement read at " + stamp(op.Invoke)
			claims[instant(s.Account, s.From)] = append(claims[instant(s.Account, s.From)], claim{s.OpeningCents, what + " opens with"})
			claims[instant(s.Account, s.To)] = append(claims[instant(s.Account, s.To)], claim{s.ClosingCents, what + " closes with"})
		case op.Kind == KindBalanceAt && op.Outcome == OK && op.Answer.Status == http.StatusOK:
			b := op.BalanceAt
			claims[instant(b.Account, b.At)] = append(claims[instant(b.Account, b.At)], claim{b.Cents, "/saldo read at " + stamp(op.Invoke) + " says"})
		}
	}
	for _, k := range sortedKeys(claims) {
		c := claims[k]
		for _, o := range c[1:] {
			if o.cents != c[0].cents {
				f.add(StatementSum, k, "%s %d, %s %d", c[0].what, c[0].cents, o.what, o.cents)
			}
		}
	}
	return f.out
}
