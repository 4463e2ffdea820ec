package transfer

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// HeldResult is a result the projection kept because no visible transfer
// had its id with the request it was decided for when it arrived (a
// commit not yet visible, a failover that lost an acknowledged transfer, a
// restore from backup, a retry that recreated the transfer, a bug). One
// bound to a request is applied by the store's re-apply task once the
// transfer of that request is visible, within a window. Otherwise, since
// results carry no amount, it is applied to a transfer with that id only
// against the ledger's record of what it settled (see CheckSettlement), by
// an operator, who applies or discards it.
type HeldResult struct {
	EventID    uuid.UUID
	Type       string
	TransferID uuid.UUID
	Status     Status
	Reason     string
	Payload    []byte
	ReceivedAt time.Time
	// Resolution is empty while held, else ResolutionApplied or
	// ResolutionDiscarded.
	Resolution string
	ResolvedAt time.Time
	ResolvedBy string
	// Note is the operator's reason for the resolution.
	Note string
	// Transfer is the transfer with that id now, if one exists (a client's
	// retry with the same key created it).
	Transfer *Transfer
}

// Resolutions of a held result (wire names).
const (
	ResolutionApplied   = "APLICADO"
	ResolutionDiscarded = "DESCARTADO"
)

// Settlement is the ledger's record of a transfer id: what it was asked to
// settle and what it decided (its GET /ops/liquidacoes/{id}).
type Settlement struct {
	Source      string
	Destination string
	AmountCents int64
	Currency    string
	// Result is LIQUIDADA or REJEITADA.
	Result Status
	// Reason is the ledger's motivo of a rejection.
	Reason string
}

// Resolution is who resolves a held result, and why.
type Resolution struct {
	// Operator is the token's sub.
	Operator string
	// Note is the operator's reason (a ticket); may be empty.
	Note string
}

// Errors of held results.
var (
	// ErrHeldNotFound: no held result has that event id.
	ErrHeldNotFound = errors.New("no held result has this event id")
	// ErrHeldResolved: the held result was already applied or discarded.
	ErrHeldResolved = errors.New("the held result was already resolved")
	// ErrNotTheSettledTransfer: the transfer with the held result's id is
	// not the one the ledger settled (accounts, amount, currency or result
	// differ), is not PENDENTE, or does not exist.
	ErrNotTheSettledTransfer = errors.New("the transfer is not the one the ledger settled")
)

// CheckSettlement returns nil when h may be applied to t: t is PENDENTE,
// has h's id, and is the transfer the ledger settled under that id (same
// source and destination accounts, amount and currency, and the ledger
// decided what h says). Otherwise it returns ErrNotTheSettledTransfer
// saying what differs.
func CheckSettlement(h HeldResult, t Transfer, s Settlement) error {
	var diffs []string
	if t.ID != h.TransferID {
		diffs = append(diffs, "transfer id")
	}
	if t.Status != StatusPending {
		diffs = append(diffs, fmt.Sprintf("status is %s, not PENDENTE", t.Status))
	}
	if t.Source != s.Source {
		diffs = append(diffs, "contaOrigem")
	}
	if t.Destination != s.Destination {
		diffs = append(diffs, "contaDestino")
	}
	if t.AmountCents != s.AmountCents {
		diffs = append(diffs, "valorEmCentavos")
	}
	if t.Currency != s.Currency {
		diffs = append(diffs, "moeda")
	}
	if s.Result != h.Status || (h.Status == StatusRejected && s.Reason != h.Reason) {
		diffs = append(diffs, fmt.Sprintf("the ledger's result (%s) is not the held one (%s)", s.Result, h.Status))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %v", ErrNotTheSettledTransfer, diffs)
	}
	return nil
}
