package transfer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
)

// HeldResult is a result the projection kept because no visible transfer
// had its id with the request it was decided for when it arrived (a
// commit not yet visible, a failover that lost an acknowledged transfer, a
// restore from backup, a retry that recreated the transfer, a bug). One
// bound to a request is applied by the store's re-apply task once the
// transfer of that request is visible, within a window. Otherwise, since
// results carry no amount, it is applied to a transfer with that id only
// against the ledger's own record of what it settled, which this service
// reads from the ledger (see CheckSettlement), by an operator, who names
// the held result and the decision (apply or discard) and nothing else.
type HeldResult struct {
	EventID    uuid.UUID
	Type       string
	TransferID uuid.UUID
	Status     Status
	Reason     string
	Payload    []byte
	ReceivedAt time.Time
	// RequestEventID is the result's eventoSolicitacaoId; uuid.Nil when it
	// carried none.
	RequestEventID uuid.UUID
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

// Settlement is the ledger's record of a transfer id, as the ledger
// answers it (its GET /ops/liquidacoes/{id}): what it was asked to settle,
// for whom, for which request, and what it decided.
type Settlement struct {
	TransferID  uuid.UUID
	Source      string
	Destination string
	AmountCents int64
	Currency    string
	// Client is the clienteId the ledger received.
	Client string
	// RequestEventID is the eventoSolicitacaoId the ledger received;
	// uuid.Nil when it kept none.
	RequestEventID uuid.UUID
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
	ErrHeldNotFound = errkind.Errorf(errkind.NotFound, "no held result has this event id")
	// ErrHeldResolved: the held result was already applied or discarded.
	ErrHeldResolved = errkind.Errorf(errkind.Conflict, "the held result was already applied or discarded")
	// ErrNotTheSettledTransfer: the transfer with the held result's id is
	// not the one the ledger settled (id, accounts, amount, currency,
	// client, request or result differ), is not PENDENTE, or does not
	// exist. The client is told the whole error, which says what differs.
	ErrNotTheSettledTransfer = &errkind.Error{Kind: errkind.Conflict, Detail: "the transfer is not the one the ledger settled, so the result stays held", Whole: true}
	// ErrNoSettlement: the ledger has no record of the transfer id (it
	// never decided it): there is nothing to apply.
	ErrNoSettlement = errkind.Errorf(errkind.Conflict, "the ledger has no record of this transfer id: there is no outcome to apply; the result stays held")
)

// CheckSettlement returns nil when h may be applied to t with the
// ledger's record s: t is PENDENTE, has h's id, and is the transfer the
// ledger decided under that id (same id, source and destination accounts,
// amount, currency and client); the ledger decided what h says (result and
// reason); and, when the ledger kept the request event its result answers,
// h answers that same request. The transfer's own request event id is not
// compared: a transfer a client's retry recreated after its row was lost
// has a new one, and the fields above are what make it the same transfer.
// Otherwise it returns ErrNotTheSettledTransfer saying what differs.
func CheckSettlement(h HeldResult, t Transfer, s Settlement) error {
	var diffs []string
	if t.ID != h.TransferID || s.TransferID != h.TransferID {
		diffs = append(diffs, "transfer id")
	}
	if t.Status != StatusPending {
		diffs = append(diffs, fmt.Sprintf("status is %s, not PENDENTE", t.Status))
	}
	for _, f := range []struct {
		name        string
		here, there string
	}{
		{"contaOrigem", t.Source, s.Source},
		{"contaDestino", t.Destination, s.Destination},
		{"valorEmCentavos", strconv.FormatInt(t.AmountCents, 10), strconv.FormatInt(s.AmountCents, 10)},
		{"moeda", t.Currency, s.Currency},
		{"clienteId", t.Client, s.Client},
	} {
		if f.here != f.there {
			diffs = append(diffs, fmt.Sprintf("%s %q here, %q in the ledger", f.name, f.here, f.there))
		}
	}
	if s.Result != StatusSettled && s.Result != StatusRejected {
		diffs = append(diffs, fmt.Sprintf("the ledger's result is %q, not final", s.Result))
	} else if s.Result != h.Status || (h.Status == StatusRejected && s.Reason != h.Reason) {
		diffs = append(diffs, fmt.Sprintf("the ledger's result (%s %s) is not the held one (%s %s)", s.Result, s.Reason, h.Status, h.Reason))
	}
	if s.RequestEventID != uuid.Nil && h.RequestEventID != s.RequestEventID {
		diffs = append(diffs, "eventoSolicitacaoId: the held result answers another request than the ledger decided")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s", ErrNotTheSettledTransfer, strings.Join(diffs, "; "))
	}
	return nil
}
