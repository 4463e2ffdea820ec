package history

import (
	"fmt"
	"net/http"
	"sort"
	"time"
)

// checkBank checks each balance snapshot: per currency all balances sum to
// zero and customer balances to the deposits made (those completed before
// the snapshot began at least, those begun before it ended at most), none
// is negative, every posting is of a transfer or deposit a client asked
// for and did not see refused, and postings once seen (in a snapshot, or
// as a LIQUIDADA read) are in every snapshot begun after.
func checkBank(h History) []Anomaly {
	type dep struct {
		invoke, complete time.Time
		known            bool // ok; else info
		Deposit
	}
	var deps []dep
	depKeys := map[string]bool{}
	mayExist := map[string]bool{} // transfer keys answered 202 or of unknown outcome
	var snaps []Op
	type seen struct {
		at  time.Time
		why string
	}
	mustHave := map[string]seen{} // transfer id -> when its postings were known to exist
	for _, op := range h {
		switch {
		case op.Kind == KindDeposit && op.Outcome != Fail:
			deps = append(deps, dep{op.Invoke, op.Complete, op.Outcome == OK, *op.Deposit})
			depKeys[op.Key] = true
		case op.Kind == KindPost && (accepted202(op) || op.Outcome == Info):
			mayExist[op.Key] = true
		case op.Kind == KindGet && op.Outcome == OK && op.Answer.Status == http.StatusOK && op.Answer.TransferStatus == StatusSettled:
			if s, ok := mustHave[op.Key]; !ok || op.Complete.Before(s.at) {
				mustHave[op.Key] = seen{op.Complete, "read LIQUIDADA"}
			}
		case op.Kind == KindSnapshot:
			snaps = append(snaps, op)
		}
	}
	sort.SliceStable(snaps, func(i, j int) bool { return snaps[i].Invoke.Before(snaps[j].Invoke) })

	var out []Anomaly
	reported := map[string]bool{}
	once := func(a Anomaly) {
		if k := a.Kind + " " + a.About; !reported[k] {
			reported[k] = true
			out = append(out, a)
		}
	}
	for _, s := range snaps {
		at := s.Invoke.UTC().Format(time.RFC3339Nano)
		sum, customers := map[string]int64{}, map[string]int64{}
		for _, b := range s.Snapshot.Balances {
			sum[b.Currency] += b.Cents
			if !b.Funding {
				customers[b.Currency] += b.Cents
				if b.Cents < 0 {
					out = append(out, Anomaly{BankNegative, "snapshot " + at, fmt.Sprintf("%s holds %d", b.Account, b.Cents)})
				}
			}
		}
		lo, hi := map[string]int64{}, map[string]int64{}
		for _, d := range deps {
			if d.known && d.complete.Before(s.Invoke) {
				lo[d.Currency] += d.AmountCents
			}
			if d.invoke.Before(s.Complete) {
				hi[d.Currency] += d.AmountCents
			}
		}
		for _, cur := range sortedKeys(sum) {
			if sum[cur] != 0 {
				out = append(out, Anomaly{BankSum, "snapshot " + at, fmt.Sprintf("%s sums to %d", cur, sum[cur])})
			}
		}
		for _, cur := range sortedKeys(customers) {
			if c := customers[cur]; c < lo[cur] || c > hi[cur] {
				out = append(out, Anomaly{BankDeposits, "snapshot " + at,
					fmt.Sprintf("%s customers hold %d, deposits made %d..%d", cur, c, lo[cur], hi[cur])})
			}
		}
		transfers := s.Snapshot.TransferIDs()
		has := make(map[string]bool, len(transfers))
		for _, id := range transfers {
			has[id] = true
			if !mayExist[id] {
				once(Anomaly{StrayPosting, id, "postings of a transfer no client had accepted (snapshot " + at + ")"})
			}
		}
		for _, id := range s.Snapshot.DepositIDs() {
			if !depKeys[id] {
				once(Anomaly{StrayPosting, id, "postings of a deposit no client made (snapshot " + at + ")"})
			}
		}
		var lost []Anomaly
		for id, m := range mustHave {
			if m.at.Before(s.Invoke) && !has[id] && !reported[LostPosting+" "+id] {
				reported[LostPosting+" "+id] = true
				lost = append(lost, Anomaly{LostPosting, id, fmt.Sprintf("%s at %s, no postings in snapshot %s",
					m.why, m.at.UTC().Format(time.RFC3339Nano), at)})
			}
		}
		sort.Slice(lost, func(i, j int) bool { return lost[i].About < lost[j].About })
		out = append(out, lost...)
		for id := range has {
			if m, ok := mustHave[id]; !ok || s.Complete.Before(m.at) {
				mustHave[id] = seen{s.Complete, "posted in snapshot " + at}
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
