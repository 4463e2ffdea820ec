package history

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Window is what a fault's window held: the figures its Expect is
// checked against.
type Window struct {
	Crash          string
	From, To       time.Time
	Expect         Expect
	Snapshots      int // snapshots begun inside it
	Reads          int // GETs invoked inside it, answered 200 or 404
	UnknownPosts   int // POSTs invoked inside it, outcome unknown
	WritesInFlight int // POSTs invoked before it began that completed after
}

// windows measures each fault's window.
func windows(h History) []Window {
	var out []Window
	for _, op := range h {
		if op.Kind == KindCrash {
			out = append(out, Window{Crash: op.Crash.Name, From: op.Invoke, To: op.Complete, Expect: op.Crash.Expect})
		}
	}
	if len(out) == 0 {
		return nil
	}
	for _, op := range h {
		for i := range out {
			w := &out[i]
			inside := !op.Invoke.Before(w.From) && !op.Invoke.After(w.To)
			switch {
			case op.Kind == KindSnapshot && inside:
				w.Snapshots++
			case op.Kind == KindGet && inside && op.Outcome == OK &&
				(op.Answer.Status == http.StatusOK || op.Answer.Status == http.StatusNotFound):
				w.Reads++
			case op.Kind == KindPost && inside && op.Outcome == Info:
				w.UnknownPosts++
			}
			if op.Kind == KindPost && op.Invoke.Before(w.From) && op.Complete.After(w.From) {
				w.WritesInFlight++
			}
		}
	}
	return out
}

// checkMinimums reports a history that cannot have tested what the checks
// claim: one with no transfer answered 202, no read answered 200, no
// snapshot with a transfer's postings, or no record published and
// consumed (a run that checked nothing passes every other check); one
// with holds in its mix that lacks one of a hold's steps
// (missingHoldEndings); one whose mix claims refunds or statements that
// lacks what they are (missingRefundEndings); and each fault whose window lacks what its Expect
// names.
func checkMinimums(h History) []Anomaly {
	var accepted, read, posted, published, consumed bool
	for _, op := range h {
		switch {
		case accepted202(op):
			accepted = true
		case op.Kind == KindGet && op.Outcome == OK && op.Answer.Status == http.StatusOK:
			read = true
		case op.Kind == KindSnapshot && len(op.Snapshot.TransferIDs()) > 0:
			posted = true
		case op.Kind == KindPublished:
			published = true
		case op.Kind == KindConsumed:
			consumed = true
		}
	}
	var missing []string
	for _, m := range []struct {
		ok   bool
		what string
	}{
		{accepted, "no transfer answered 202"}, {read, "no read answered 200"},
		{posted, "no snapshot with a transfer's postings"}, {published, "no record published"}, {consumed, "no record consumed"},
	} {
		if !m.ok {
			missing = append(missing, m.what)
		}
	}
	missing = append(missing, missingHoldEndings(h)...)
	missing = append(missing, missingRefundEndings(h)...)
	var out []Anomaly
	if len(missing) > 0 {
		out = append(out, Anomaly{Vacuous, "history", fmt.Sprintf("%d operations: %s", len(h), strings.Join(missing, ", "))})
	}
	for _, w := range windows(h) {
		var lacks []string
		if w.Expect.Snapshots && w.Snapshots == 0 {
			lacks = append(lacks, "no snapshot")
		}
		if w.Expect.Reads && w.Reads == 0 {
			lacks = append(lacks, "no read answered")
		}
		if w.Expect.UnknownPosts && w.UnknownPosts == 0 {
			lacks = append(lacks, "no POST of unknown outcome")
		}
		if w.Expect.WritesInFlight && w.WritesInFlight == 0 {
			lacks = append(lacks, "no POST in flight when it began")
		}
		if len(lacks) > 0 {
			out = append(out, Anomaly{Vacuous, w.Crash, fmt.Sprintf("%s inside its window %s..%s",
				strings.Join(lacks, ", "), w.From.UTC().Format(time.RFC3339Nano), w.To.UTC().Format(time.RFC3339Nano))})
		}
	}
	return out
}

// missingHoldEndings returns, for a history with a hold request in it (a
// run whose mix has holds), what it lacks of a hold's steps: a hold read
// RESERVADA (or a command answered 202, which says so), one read
// LIQUIDADA, one read CANCELADA and one read EXPIRADA. A history without
// holds lacks nothing.
func missingHoldEndings(h History) []string {
	asked := false
	seen := map[string]bool{}
	holds := holdIDs(h)
	for _, op := range h {
		switch {
		case op.Kind == KindPost && op.Transfer.Hold():
			asked = true
		case commandAccepted(op) && holds[op.Command.TransferID]:
			seen[StatusReserved] = true
		case op.Kind == KindGet && op.Outcome == OK && op.Answer.Status == http.StatusOK && holds[op.Key]:
			seen[op.Answer.TransferStatus] = true
		}
	}
	if !asked {
		return nil
	}
	var missing []string
	for _, st := range []string{StatusReserved, StatusSettled, StatusCancelled, StatusExpired} {
		if !seen[st] {
			missing = append(missing, "no hold read "+st)
		}
	}
	return missing
}

// missingRefundEndings returns, for a history whose mix claims refunds
// (KindMix MixRefunds, or a refund POST in it), what it lacks of them: a
// refund answered 202, one read LIQUIDADO with its postings in a
// snapshot, one refused for exceeding what remains (422 or REJEITADO
// VALOR_EXCEDE_ESTORNAVEL); and for one that claims statements
// (MixStatements), a snapshot with running balances, a statement and a
// balance at an instant answered 200. A history that claims neither
// lacks nothing.
func missingRefundEndings(h History) []string {
	claims := map[string]bool{}
	var accepted, settled, posted, exceeded, running, statement, balanceAt bool
	for _, op := range h {
		switch {
		case op.Kind == KindMix:
			claims[op.Key] = true
		case isRefundPost(op):
			claims[MixRefunds] = true
		case op.Kind == KindSnapshot:
			running = running || len(op.Snapshot.Postings) > 0
			for _, e := range op.Snapshot.Entries {
				posted = posted || e.Type == EntryRefund
			}
		case op.Kind == KindStatement && op.Outcome == OK && op.Answer.Status == http.StatusOK:
			statement = true
		case op.Kind == KindBalanceAt && op.Outcome == OK && op.Answer.Status == http.StatusOK:
			balanceAt = true
		}
		accepted = accepted || refundAccepted(op)
		settled = settled || (refundRead(op) && op.Answer.Refund.Status == RefundSettled)
		exceeded = exceeded || refundExceeds(op)
	}
	var missing []string
	need := func(ok bool, what string) {
		if !ok {
			missing = append(missing, what)
		}
	}
	if claims[MixRefunds] {
		need(accepted, "no refund answered 202")
		need(settled, "no refund read "+RefundSettled)
		need(posted, "no refund's postings in a snapshot")
		need(exceeded, "no refund refused for exceeding what remains")
	}
	if claims[MixStatements] {
		need(running, "no snapshot with running balances")
		need(statement, "no statement answered 200")
		need(balanceAt, "no balance at an instant answered 200")
	}
	return missing
}
