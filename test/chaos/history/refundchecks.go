package history

import (
	"net/http"
	"time"

	"github.com/paysuite/payments/pkg/events"
)

// checkRefunds judges refunds (CONTRACTS section 10) from the three sides
// that must agree, as the hold checks do: the ledger's snapshots (what
// the refunds posted), its published results, and the clients' POSTs and
// reads. Each kind is reported once per refund id, refund key or
// transfer.
func checkRefunds(h History) []Anomaly {
	f := &findings{seen: map[string]bool{}}
	refunds := refundsOf(h)
	settled := settledAmounts(h)
	checkRefundSnapshots(h, refunds, settled, f)
	checkRefundOutcomes(h, refunds, settled, f)
	checkRefundReads(h, refunds, settled, f)
	checkRefundPosts(h, refunds, settled, f)
	return f.out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// checkRefundSnapshots judges the refunds' postings in each snapshot: a
// transfer's refunds posting no more than it settled (OverRefund), each
// refund once (RefundTwice), only refunds a client asked for
// (StrayPosting) and none the ledger rejected or a read said it did
// (RefundStatus), and postings once seen, or read LIQUIDADO, in every
// snapshot begun after (LostPosting).
func checkRefundSnapshots(h History, refunds map[string]*refundInfo, settled map[string]int64, f *findings) {
	mustHave := map[string]time.Time{} // refund id -> when its postings were known to exist
	for _, op := range h {
		if refundRead(op) && op.Answer.Refund.Status == RefundSettled {
			if t, ok := mustHave[op.Key]; !ok || op.Complete.Before(t) {
				mustHave[op.Key] = op.Complete
			}
		}
	}
	for _, s := range sortedSnapshots(h) {
		at := "snapshot " + stamp(s.Invoke)
		perTransfer := map[string]int64{}
		has := map[string]bool{}
		for _, e := range s.Snapshot.Entries {
			if e.Type != EntryRefund {
				continue
			}
			ri := refunds[e.ID]
			switch {
			case has[e.ID]:
				f.add(RefundTwice, e.ID, "two entries of the refund (%s)", at)
			case e.Postings > 2:
				f.add(RefundTwice, e.ID, "%d posting rows, debit %d and credit %d (%s)", e.Postings, e.DebitCents, e.CreditCents, at)
			case len(ri.asked) == 0:
				f.add(StrayPosting, e.ID, "postings of a refund no client asked for (%s)", at)
			case ri.knownRejected():
				f.add(RefundStatus, e.ID, "postings of a refund rejected (%s)", at)
			}
			has[e.ID] = true
			perTransfer[e.TransferID] += e.DebitCents
		}
		for _, t := range sortedKeys(perTransfer) {
			if perTransfer[t] > settled[t] {
				f.add(OverRefund, t, "its refunds post %d, it settled %d (%s)", perTransfer[t], settled[t], at)
			}
		}
		for _, id := range sortedKeys(mustHave) {
			if mustHave[id].Before(s.Invoke) && !has[id] {
				f.add(LostPosting, id, "refund known posted at %s, no postings in %s", stamp(mustHave[id]), at)
			}
		}
		for id := range has {
			if t, ok := mustHave[id]; !ok || s.Complete.Before(t) {
				mustHave[id] = s.Complete
			}
		}
	}
}

// checkRefundOutcomes judges each refund's results: one EstornoLiquidado
// (RefundTwice), not both results, only for a refund a client asked for,
// a refund answered 202 read terminal, reads agreeing with the result and
// the postings, a rejection for exceeding only where it did not fit
// (RefundStatus); and per transfer the results and reads of settled
// refunds within what it settled (OverRefund).
func checkRefundOutcomes(h History, refunds map[string]*refundInfo, settled map[string]int64, f *findings) {
	published, read := map[string]int64{}, map[string]int64{} // transfer -> its refunds' amounts
	final := map[string]int64{}                               // transfer -> what its refunds settled in the end
	for _, id := range sortedKeys(refunds) {
		ri := refunds[id]
		if len(ri.settled) > 0 || ri.posted > 0 || ri.read[RefundSettled] {
			final[ri.transfer] += ri.amount()
		}
		if len(ri.settled) > 0 {
			published[ri.transfer] += ri.settled[0].AmountCents
		}
		if ri.read[RefundSettled] {
			read[ri.transfer] += ri.readCents
		}
	}
	for _, id := range sortedKeys(refunds) {
		ri := refunds[id]
		switch {
		case len(ri.settled) > 1:
			f.add(RefundTwice, id, "%d EstornoLiquidado results (%s, %s)", len(ri.settled), ri.settled[0].EventID, ri.settled[1].EventID)
		case len(ri.settled) > 0 && len(ri.rejected) > 0:
			f.add(RefundStatus, id, "the ledger published EstornoLiquidado and EstornoRejeitado %s", ri.rejected[0].Reason)
		case (len(ri.settled) > 0 || len(ri.rejected) > 0) && len(ri.asked) == 0:
			f.add(RefundStatus, id, "a result for a refund no client asked for")
		case ri.accepted && !ri.read[RefundSettled] && !ri.read[RefundRejected]:
			f.add(RefundStatus, id, "answered 202, never read %s or %s", RefundSettled, RefundRejected)
		case ri.read[RefundSettled] && ri.read[RefundRejected]:
			f.add(RefundStatus, id, "read %s and %s", RefundSettled, RefundRejected)
		case ri.read[RefundSettled] && len(ri.rejected) > 0:
			f.add(RefundStatus, id, "read %s, the ledger published EstornoRejeitado %s", RefundSettled, ri.rejected[0].Reason)
		case ri.read[RefundRejected] && (len(ri.settled) > 0 || ri.posted > 0):
			f.add(RefundStatus, id, "read %s, the ledger posted it", RefundRejected)
		case ri.read[RefundSettled] && len(ri.settled) > 0 && ri.settled[0].AmountCents != ri.readCents:
			f.add(RefundStatus, id, "read %s of %d, the ledger published %d", RefundSettled, ri.readCents, ri.settled[0].AmountCents)
		case ri.read[RefundSettled] && ri.posted > 0 && ri.posted != ri.readCents:
			f.add(RefundStatus, id, "read %s of %d, its postings move %d", RefundSettled, ri.readCents, ri.posted)
		}
		exceeded := ri.read[RefundRejected] && ri.readReason == events.ReasonExceedsRefundable
		for _, r := range ri.rejected {
			exceeded = exceeded || r.Reason == events.ReasonExceedsRefundable
		}
		if a := ri.amount(); exceeded && a > 0 && final[ri.transfer]+a <= settled[ri.transfer] {
			f.add(RefundStatus, id, "rejected %s asking %d, the transfer's refunds settled %d of %d in the end",
				events.ReasonExceedsRefundable, a, final[ri.transfer], settled[ri.transfer])
		}
	}
	for _, t := range sortedKeys(published) {
		if published[t] > settled[t] {
			f.add(OverRefund, t, "the ledger published refunds of %d, it settled %d", published[t], settled[t])
		}
	}
	for _, t := range sortedKeys(read) {
		if read[t] > settled[t] {
			f.add(OverRefund, t, "refunds read %s summing to %d, it settled %d", RefundSettled, read[t], settled[t])
		}
	}
}

// checkRefundReads judges reads: a refund's read never contradicting one
// that completed before it began (a 202 then 404; LIQUIDADO or REJEITADO
// then PENDENTE, 404 or the other), naming the refund's transfer and the
// motivo the ledger published (RefundStatus); a transfer's
// valorEstornadoEmCentavos within what it settled (OverRefund) and no
// less than the refunds read LIQUIDADO before it began (RefundStatus).
func checkRefundReads(h History, refunds map[string]*refundInfo, settled map[string]int64, f *findings) {
	obs := map[string][]observation{}
	type done struct {
		at    time.Time
		cents int64
	}
	settledAt := map[string]map[string]done{} // transfer -> refund id -> its first read LIQUIDADO
	for _, op := range h {
		switch {
		case refundAccepted(op):
			obs[op.Key] = append(obs[op.Key], observation{op.Invoke, op.Complete, rankExists, "", "202", true})
		case op.Kind == KindRefundGet && op.Outcome == OK && op.Answer.Status == http.StatusNotFound:
			obs[op.Key] = append(obs[op.Key], observation{op.Invoke, op.Complete, rankAbsent, "", "404", false})
		case refundRead(op):
			r := op.Answer.Refund
			o := observation{invoke: op.Invoke, complete: op.Complete, rank: rankExists, status: r.Status, what: r.Status}
			if r.Status == RefundSettled || r.Status == RefundRejected {
				o.rank = rankTerminal
			}
			obs[op.Key] = append(obs[op.Key], o)
			ri := refunds[op.Key]
			switch {
			case r.TransferID != "" && r.TransferID != op.Refund.TransferID:
				f.add(RefundStatus, op.Key, "read at %s naming the transfer %s, not %s", stamp(op.Invoke), r.TransferID, op.Refund.TransferID)
			case r.Status == RefundRejected && len(ri.rejected) > 0 && r.Reason != ri.rejected[0].Reason:
				f.add(RefundStatus, op.Key, "read %s %s, the ledger published %s", RefundRejected, r.Reason, ri.rejected[0].Reason)
			}
			if r.Status == RefundSettled {
				t := op.Refund.TransferID
				if settledAt[t] == nil {
					settledAt[t] = map[string]done{}
				}
				if d, ok := settledAt[t][op.Key]; !ok || op.Complete.Before(d.at) {
					settledAt[t][op.Key] = done{op.Complete, r.AmountCents}
				}
			}
		}
	}
	for _, id := range sortedKeys(obs) {
		list := obs[id]
		sortObservations(list)
		if a, b, ok := contradiction(list); ok {
			f.add(RefundStatus, id, "%s (done %s) then %s (from %s)", a.what, stamp(a.complete), b.what, stamp(b.invoke))
		}
	}
	for _, op := range h {
		if op.Kind != KindGet || op.Outcome != OK || op.Answer.Status != http.StatusOK {
			continue
		}
		got := op.Answer.RefundedCents
		if got > settled[op.Key] {
			f.add(OverRefund, op.Key, "read at %s having refunded %d, it settled %d", stamp(op.Invoke), got, settled[op.Key])
			continue
		}
		var before int64
		for _, d := range settledAt[op.Key] {
			if d.at.Before(op.Invoke) {
				before += d.cents
			}
		}
		if got < before {
			f.add(RefundStatus, op.Key, "read at %s having refunded %d, refunds read %s before it sum to %d", stamp(op.Invoke), got, RefundSettled, before)
		}
	}
}

// checkRefundPosts judges each refund answered 202: its body PENDENTE and
// for a transfer the ledger settled (RefundStatus); asking no more than
// the transfer settled, nor more than the refunds accepted before it was
// first sent (and not known rejected) leave (OverRefund: the contract's
// 422). Each is reported about its refund key.
func checkRefundPosts(h History, refunds map[string]*refundInfo, settled map[string]int64, f *findings) {
	byTransfer := map[string][]string{}
	for _, id := range sortedKeys(refunds) {
		byTransfer[refunds[id].transfer] = append(byTransfer[refunds[id].transfer], id)
	}
	for _, op := range h {
		if !refundAccepted(op) {
			continue
		}
		t, n, ri := op.Refund.TransferID, op.Refund.AmountCents, refunds[op.Key]
		if st := op.Answer.Refund; st != nil && st.Status != RefundPending {
			f.add(RefundStatus, op.Key, "answered 202 with status %s", st.Status)
			continue
		}
		if _, ok := settled[t]; !ok {
			f.add(RefundStatus, op.Key, "answered 202 for the transfer %s, which the ledger never settled", t)
			continue
		}
		if n > settled[t] {
			f.add(OverRefund, op.Key, "answered 202 asking %d of %s, which settled %d", n, t, settled[t])
			continue
		}
		var before int64
		for _, other := range byTransfer[t] {
			o := refunds[other]
			if other != op.Key && o.accepted && o.firstOK.Before(ri.firstSent) && !o.knownRejected() {
				before += o.amount()
			}
		}
		if max(n, 1)+before > settled[t] {
			f.add(OverRefund, op.Key, "answered 202 asking %d of %s, which settled %d, after refunds accepted of %d (the contract's 422)",
				n, t, settled[t], before)
		}
	}
}
