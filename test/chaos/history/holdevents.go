package history

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/events"
)

// checkHoldOutcomes judges each hold's release against what the ledger
// published and what clients asked and read: one release result per
// hold (ReleasedTwice); a capture published only when a client asked for
// one, of no more than was reserved and of what was posted; a client's
// cancellation only when a client asked for one (OverCapture,
// HoldStatus); every read of a released hold the status the ledger
// published, a capture's amount with it, and no expiry read before
// expiraEm (HoldStatus); a hold's status only on a hold (HoldStatus).
func checkHoldOutcomes(h History, holds map[string]*holdInfo, f *findings) {
	bodies := requestBodies(h)
	releases := map[string][]Record{} // hold id -> its distinct release results
	seen := map[string]bool{}
	posted := map[string]int64{} // hold id -> what its postings debit, in the first snapshot with them
	for _, op := range h {
		switch op.Kind {
		case KindPublished:
			r := *op.Record
			if seen[r.EventID] {
				continue
			}
			seen[r.EventID] = true
			if r.TransferID != "" && (r.EventType == TypeCancelled || (r.EventType == events.TypeSettled && holds[r.TransferID] != nil)) {
				releases[r.TransferID] = append(releases[r.TransferID], r)
			}
		case KindSnapshot:
			for _, e := range op.Snapshot.Entries {
				if _, ok := posted[e.ID]; !ok && e.Type == EntryTransfer && holds[e.ID] != nil {
					posted[e.ID] = e.DebitCents
				}
			}
		}
	}
	for _, id := range sortedKeys(releases) {
		rs, hi := releases[id], holds[id]
		if len(rs) > 1 {
			var names []string
			for _, r := range rs {
				names = append(names, fmt.Sprintf("%s %s (%s)", r.EventType, r.EventID, releaseStatus(r)))
			}
			f.add(ReleasedTwice, id, "released by %d results: %s", len(rs), strings.Join(names, ", "))
			continue
		}
		r := rs[0]
		st := releaseStatus(r)
		switch p, isPosted := posted[id]; {
		case hi == nil:
			f.add(HoldStatus, id, "%s %s for a transfer no client asked to hold", r.EventType, st)
		case !terminal(st):
			f.add(HoldStatus, id, "%s with %s", r.EventType, st)
		case st == StatusSettled && r.AmountCents > hi.reserved:
			f.add(OverCapture, id, "the ledger published a capture of %d, the hold reserved %d", r.AmountCents, hi.reserved)
		case st == StatusSettled && len(hi.captures) == 0:
			f.add(HoldStatus, id, "the ledger published a capture no client asked for")
		case st == StatusSettled && r.AmountCents != 0 && isPosted && p != r.AmountCents:
			f.add(HoldStatus, id, "the ledger published a capture of %d, its postings move %d", r.AmountCents, p)
		case st == StatusCancelled && hi.cancels == 0:
			f.add(HoldStatus, id, "the ledger published a cancellation no client asked for")
		}
	}
	for _, op := range h {
		if op.Kind != KindGet || op.Outcome != OK || op.Answer.Status != http.StatusOK {
			continue
		}
		id, st, hi := op.Key, op.Answer.TransferStatus, holds[op.Key]
		when := op.Complete.UTC().Format(time.RFC3339Nano)
		if hi == nil {
			if holdStatus(st) && len(bodies[id]) > 0 {
				f.add(HoldStatus, id, "an immediate transfer read %s at %s", st, when)
			}
			continue
		}
		var published string // the ledger's one release, if it published one
		var publishedCents int64
		if rs := releases[id]; len(rs) == 1 {
			published, publishedCents = releaseStatus(rs[0]), rs[0].AmountCents
		}
		switch got := op.Answer.SettledCents; {
		case !terminal(st) || st == StatusRejected:
		case st == StatusSettled && got > hi.reserved:
			f.add(OverCapture, id, "read LIQUIDADA at %s having captured %d, the hold reserved %d", when, got, hi.reserved)
		case published != "" && published != st:
			f.add(HoldStatus, id, "read %s at %s, the ledger published %s", st, when, published)
		case st == StatusSettled && got != 0 && publishedCents != 0 && got != publishedCents:
			f.add(HoldStatus, id, "read LIQUIDADA at %s having captured %d, the ledger published %d", when, got, publishedCents)
		case st == StatusSettled && len(hi.captures) == 0:
			f.add(HoldStatus, id, "read LIQUIDADA at %s, no client asked to capture it", when)
		case st == StatusCancelled && hi.cancels == 0:
			f.add(HoldStatus, id, "read CANCELADA at %s, no client asked to cancel it", when)
		case st == StatusExpired && !hi.expires.IsZero() && op.Complete.Before(hi.expires):
			f.add(HoldStatus, id, "read EXPIRADA at %s, it expires at %s", when, hi.expires.UTC().Format(time.RFC3339Nano))
		}
	}
}

// checkCommands finds captures and cancellations answered 202 for a
// transfer that was not RESERVADA (CommandNotReserved): no hold, one the
// ledger never reserved (no TransferenciaReservada published, no read
// RESERVADA, no reservation in a snapshot), one read terminal before the
// command was first sent (its key's first try: a replay answers that
// first answer again), or a 202 whose body names another status; and
// captures answered 202 for more than was reserved (OverCapture). Each is
// reported about its command key.
func checkCommands(h History, holds map[string]*holdInfo, f *findings) {
	reserved := map[string]bool{}
	firstTerminal := map[string]time.Time{} // transfer id -> when a read first completed terminal
	firstSent := map[string]time.Time{}     // command key -> its first try that may have taken effect
	for _, op := range h {
		switch {
		case op.Kind == KindPublished && op.Record.EventType == TypeReserved:
			reserved[op.Record.TransferID] = true
		case op.Kind == KindGet && op.Outcome == OK && op.Answer.Status == http.StatusOK:
			if op.Answer.TransferStatus == StatusReserved {
				reserved[op.Key] = true
			}
			if t, ok := firstTerminal[op.Key]; terminal(op.Answer.TransferStatus) && (!ok || op.Complete.Before(t)) {
				firstTerminal[op.Key] = op.Complete
			}
		case op.Kind == KindSnapshot:
			for _, r := range op.Snapshot.Holds {
				reserved[r.TransferID] = true
			}
		case commandMayHaveHappened(op):
			if t, ok := firstSent[op.Key]; !ok || op.Invoke.Before(t) {
				firstSent[op.Key] = op.Invoke
			}
		}
	}
	for _, op := range h {
		if !commandAccepted(op) {
			continue
		}
		id, hi := op.Command.TransferID, holds[op.Command.TransferID]
		what := fmt.Sprintf("%s of %s answered 202", op.Kind, id)
		kind, why := CommandNotReserved, ""
		switch t, readTerminal := firstTerminal[id]; {
		case hi == nil:
			why = "a transfer no client asked to hold"
		case op.Answer.TransferStatus != "" && op.Answer.TransferStatus != StatusReserved:
			why = "with status " + op.Answer.TransferStatus
		case !reserved[id]:
			why = "a hold the ledger never reserved"
		case readTerminal && t.Before(firstSent[op.Key]):
			why = fmt.Sprintf("first sent at %s, after a read of a terminal status at %s",
				firstSent[op.Key].UTC().Format(time.RFC3339Nano), t.UTC().Format(time.RFC3339Nano))
		case op.Kind == KindCapture && op.Command.AmountCents > hi.reserved:
			kind, why = OverCapture, fmt.Sprintf("asking %d, the hold reserved %d", op.Command.AmountCents, hi.reserved)
		}
		if why != "" {
			f.add(kind, op.Key, "%s: %s", what, why)
		}
	}
}
