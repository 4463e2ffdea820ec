package history

import (
	"net/http"
	"time"
)

// checkHoldSnapshots judges the reservations each snapshot shows: every
// customer account's reservado within 0..saldo (ReservedRange) and equal
// to the sum of its open reservations (ReservedOpen); each reservation of
// a hold a client asked for (StrayPosting), on its source account and of
// its amount (PostingAccount, PostingAmount); a captured one with postings
// of what it captured, and postings only for a captured one (HoldPosting),
// never more than reserved (OverCapture); a hold's postings asked by a
// capture (HoldPosting) and within its reservation (OverCapture); a hold
// read released before the snapshot began released in it (ReservedOpen),
// as the read said (HoldStatus). A snapshot lists at least the open
// reservations; released ones where the ledger keeps them. Each kind is
// reported once per account or transfer (f), at the first snapshot that
// shows it.
func checkHoldSnapshots(h History, holds map[string]*holdInfo, f *findings) {
	bodies := requestBodies(h)
	type released struct {
		at     time.Time
		status string
	}
	reads := map[string][]released{} // hold id -> its reads of a terminal status
	for _, op := range h {
		if op.Kind == KindGet && op.Outcome == OK && op.Answer.Status == http.StatusOK && terminal(op.Answer.TransferStatus) && holds[op.Key] != nil {
			reads[op.Key] = append(reads[op.Key], released{op.Complete, op.Answer.TransferStatus})
		}
	}
	for _, s := range sortedSnapshots(h) {
		at := "snapshot " + s.Invoke.UTC().Format(time.RFC3339Nano)
		posted := map[string]Entry{} // the holds' postings
		for _, e := range s.Snapshot.Entries {
			if e.Type == EntryTransfer && holds[e.ID] != nil {
				posted[e.ID] = e
			}
		}
		open := map[string]int64{}
		rows := map[string]Hold{}
		for _, r := range s.Snapshot.Holds {
			rows[r.TransferID] = r
			if r.State == StatusReserved {
				open[r.Account] += r.AmountCents
			}
		}
		for _, id := range sortedKeys(rows) {
			r := rows[id]
			hi := holds[id]
			if hi == nil {
				f.add(StrayPosting, id, "a reservation of %d on %s for a transfer no client asked to hold (%s)", r.AmountCents, r.Account, at)
				continue
			}
			if kind := askedReservation(bodies[id], r); kind != "" {
				f.add(kind, id, "a reservation of %d on %s, the hold asked %s (%s)", r.AmountCents, r.Account, describeTransfer(bodies[id][0]), at)
			}
			e, isPosted := posted[id]
			switch r.State {
			case StatusSettled:
				switch {
				case r.CapturedCents > r.AmountCents:
					f.add(OverCapture, id, "captured %d of a reservation of %d (%s)", r.CapturedCents, r.AmountCents, at)
				case !isPosted:
					f.add(HoldPosting, id, "reservation captured (%d), no postings (%s)", r.CapturedCents, at)
				case r.CapturedCents != 0 && (e.DebitCents != r.CapturedCents || e.CreditCents != r.CapturedCents):
					f.add(HoldPosting, id, "reservation captured %d, its postings debit %d and credit %d (%s)", r.CapturedCents, e.DebitCents, e.CreditCents, at)
				}
			case StatusReserved, StatusCancelled, StatusExpired:
				if isPosted {
					f.add(HoldPosting, id, "postings of a reservation %s (%s)", r.State, at)
				}
			default:
				f.add(HoldStatus, id, "a reservation in state %q (%s)", r.State, at)
			}
		}
		accounts := map[string]bool{}
		for _, b := range s.Snapshot.Balances {
			accounts[b.Account] = true
			// A negative balance with nothing reserved is BankNegative's.
			if !b.Funding && (b.ReservedCents < 0 || (b.ReservedCents > 0 && b.ReservedCents > b.Cents)) {
				f.add(ReservedRange, b.Account, "reserves %d of a balance of %d (%s)", b.ReservedCents, b.Cents, at)
			}
			if b.ReservedCents != open[b.Account] {
				f.add(ReservedOpen, b.Account, "reserves %d, its open reservations sum to %d (%s)", b.ReservedCents, open[b.Account], at)
			}
		}
		for _, a := range sortedKeys(open) {
			if !accounts[a] {
				f.add(ReservedOpen, a, "open reservations summing to %d on an account with no balance (%s)", open[a], at)
			}
		}
		for _, id := range sortedKeys(posted) {
			e, hi := posted[id], holds[id]
			switch {
			case e.DebitCents > hi.reserved || e.CreditCents > hi.reserved:
				f.add(OverCapture, id, "postings debit %d and credit %d, the hold reserved %d (%s)", e.DebitCents, e.CreditCents, hi.reserved, at)
			case len(hi.captures) == 0:
				f.add(HoldPosting, id, "postings of a hold no client asked to capture (%s)", at)
			}
		}
		for _, id := range sortedKeys(reads) {
			r, ok := rows[id]
			if !ok {
				continue
			}
			for _, rd := range reads[id] {
				switch {
				case !rd.at.Before(s.Invoke):
				case r.State == StatusReserved:
					f.add(ReservedOpen, id, "read %s at %s, still reserved in %s", rd.status, rd.at.UTC().Format(time.RFC3339Nano), at)
				case r.State != rd.status:
					f.add(HoldStatus, id, "read %s at %s, the reservation is %s in %s", rd.status, rd.at.UTC().Format(time.RFC3339Nano), r.State, at)
				}
			}
		}
	}
}

// askedReservation returns "" when a hold request of the transfer asked
// reservation r (its source account and amount), else the kind of the
// difference: PostingAccount when no hold request names its account,
// PostingAmount otherwise.
func askedReservation(bodies []Transfer, r Hold) string {
	kind := PostingAccount
	for _, b := range bodies {
		if !b.Hold() || b.From != r.Account {
			continue
		}
		if b.AmountCents == r.AmountCents {
			return ""
		}
		kind = PostingAmount
	}
	return kind
}
