package history

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/paysuite/payments/pkg/events"
)

// The wire names of CONTRACTS section 9 the checker reads from published
// records.
const (
	TypeReserved   = "TransferenciaReservada"
	TypeCancelled  = "TransferenciaCancelada"
	ReasonByClient = "CANCELADA_PELO_CLIENTE"
	ReasonExpired  = "EXPIRADA"
)

// The anomaly kinds of holds (CONTRACTS section 9).
const (
	// ReservedRange: a snapshot in which a customer account's reservado is
	// negative or more than its saldo (a negative saldo with nothing
	// reserved is BankNegative's).
	ReservedRange = "reserved-range"
	// ReservedOpen: a snapshot in which an account's reservado is not the
	// sum of its open reservations, or a hold read released (LIQUIDADA,
	// CANCELADA, EXPIRADA) before the snapshot began is still open in it.
	ReservedOpen = "reserved-open"
	// ReleasedTwice: a reservation released more than once: two release
	// results published for one hold (captured and cancelled, cancelled
	// and expired, captured twice).
	ReleasedTwice = "released-twice"
	// OverCapture: more captured than reserved (by a capture answered 202,
	// the postings, the published result, a read or the reservation row).
	OverCapture = "over-capture"
	// HoldPosting: postings of a hold that do not follow its capture
	// (postings of a hold no client asked to capture, of a reservation
	// still open or released without capture; a reservation captured
	// without its postings, or with others than it captured).
	HoldPosting = "hold-posting"
	// HoldStatus: a hold's status is not the ledger's outcome: a read
	// other than the release the ledger published (LIQUIDADA for the
	// capture, with its amount; CANCELADA or EXPIRADA per its motivo) or
	// its reservation row shows, a capture or client cancellation no client
	// asked for, an expiry before expiraEm, a hold's status on an
	// immediate transfer.
	HoldStatus = "hold-status"
	// CommandNotReserved: a capture or cancellation answered 202 for a
	// transfer that was not RESERVADA: not a hold, never reserved by the
	// ledger, read terminal before the command was sent, or answered with
	// another status.
	CommandNotReserved = "not-reserved"
)

// checkHolds runs the checks of holds (holdsnap.go, holdevents.go) and
// reports each kind once per account, transfer or command key: one broken
// hold is often seen by a snapshot, a result and a read at once.
func checkHolds(h History) []Anomaly {
	f := &findings{seen: map[string]bool{}}
	holds := holdsAsked(h)
	checkHoldSnapshots(h, holds, f)
	checkHoldOutcomes(h, holds, f)
	checkCommands(h, holds, f)
	return f.out
}

// findings collects anomalies, each kind once per subject (About).
type findings struct {
	out  []Anomaly
	seen map[string]bool
}

func (f *findings) add(kind, about, format string, args ...any) {
	if k := kind + " " + about; !f.seen[k] {
		f.seen[k] = true
		f.out = append(f.out, Anomaly{kind, about, fmt.Sprintf(format, args...)})
	}
}

// holdInfo is what the clients asked of one hold.
type holdInfo struct {
	reserved int64     // the largest amount a hold request of the key asked
	expires  time.Time // the earliest expiraEm a request named; zero if none did
	captures []int64   // the amounts of captures answered 202 or of unknown outcome (all: reserved)
	cancels  int       // cancellations answered 202 or of unknown outcome
}

// holdsAsked returns, per transfer id, what was asked of each hold: a
// transfer some accepted (or possibly accepted) request created as a hold.
func holdsAsked(h History) map[string]*holdInfo {
	out := map[string]*holdInfo{}
	for _, op := range h {
		mayCreate := accepted202(op) || (op.Kind == KindPost && op.Outcome == Info) // as requestBodies
		if !mayCreate || !op.Transfer.Hold() {
			continue
		}
		b, hi := op.Transfer, out[op.Key]
		if hi == nil {
			hi = &holdInfo{}
			out[op.Key] = hi
		}
		hi.reserved = max(hi.reserved, b.AmountCents)
		if t, err := time.Parse(time.RFC3339Nano, b.ExpiresAt); err == nil && (hi.expires.IsZero() || t.Before(hi.expires)) {
			hi.expires = t
		}
	}
	for _, op := range h {
		if !commandMayHaveHappened(op) {
			continue
		}
		hi := out[op.Command.TransferID]
		if hi == nil {
			continue // a command for no hold: checkCommands reports it if it was accepted
		}
		if op.Kind == KindCancel {
			hi.cancels++
			continue
		}
		amount := op.Command.AmountCents
		if amount == 0 {
			amount = hi.reserved
		}
		if !slices.Contains(hi.captures, amount) {
			hi.captures = append(hi.captures, amount)
		}
	}
	return out
}

// holdIDs returns the ids of the transfers asked as holds.
func holdIDs(h History) map[string]bool {
	out := map[string]bool{}
	for id := range holdsAsked(h) {
		out[id] = true
	}
	return out
}

// moves reports that a posting of cents may be body b's: its amount for an
// immediate transfer, an amount one of the hold's captures asked.
func (hi *holdInfo) moves(b Transfer, cents int64) bool {
	if !b.Hold() || hi == nil {
		return b.AmountCents == cents
	}
	return slices.Contains(hi.captures, cents)
}

// captured returns the amount the postings e of a hold must move, and
// false when the hold checks judge them instead (no capture asked, or
// more than reserved).
func (hi *holdInfo) captured(e Entry) (int64, bool) {
	switch {
	case hi == nil || len(hi.captures) == 0 || e.DebitCents > hi.reserved || e.CreditCents > hi.reserved:
		return 0, false
	case slices.Contains(hi.captures, e.DebitCents):
		return e.DebitCents, true
	}
	return hi.captures[0], true
}

func isCommand(op Op) bool { return op.Kind == KindCapture || op.Kind == KindCancel }

// commandAccepted reports a capture or cancellation answered 202.
func commandAccepted(op Op) bool {
	return isCommand(op) && op.Outcome == OK && op.Answer.Status == http.StatusAccepted
}

// commandMayHaveHappened reports a command answered 202 or of unknown
// outcome.
func commandMayHaveHappened(op Op) bool {
	return commandAccepted(op) || (isCommand(op) && op.Outcome == Info)
}

// releaseStatus is the status a release result names: LIQUIDADA for a
// capture, CANCELADA or EXPIRADA per a cancellation's motivo; "" for
// another record.
func releaseStatus(r Record) string {
	switch {
	case r.EventType == events.TypeSettled:
		return StatusSettled
	case r.EventType == TypeCancelled && r.Reason == ReasonByClient:
		return StatusCancelled
	case r.EventType == TypeCancelled && r.Reason == ReasonExpired:
		return StatusExpired
	case r.EventType == TypeCancelled:
		return "motivo " + r.Reason
	}
	return ""
}

// holdStatus reports a status only a hold has.
func holdStatus(status string) bool {
	return status == StatusReserved || status == StatusCancelled || status == StatusExpired
}

// sortedSnapshots returns the history's snapshots by the time they began.
func sortedSnapshots(h History) []Op {
	var snaps []Op
	for _, op := range h {
		if op.Kind == KindSnapshot {
			snaps = append(snaps, op)
		}
	}
	slices.SortStableFunc(snaps, func(a, b Op) int { return a.Invoke.Compare(b.Invoke) })
	return snaps
}
