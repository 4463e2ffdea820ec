package ledger

import (
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
)

// ErrNotProcessed is returned by the store's Processed when the ledger has
// not settled or rejected the transfer.
var ErrNotProcessed = errkind.Errorf(errkind.NotFound, "the ledger has not processed this transfer")

// Processed is how the ledger decided one transfer, for operators: the
// result, what the TransferenciaAnalisada asked it to move and for whom, as
// received (results carry no amount, so this is what tells a transfer
// recreated under the same id from the one decided here; the transfers
// service compares every field before it applies a held result), and the
// postings it made.
type Processed struct {
	TransferID  uuid.UUID
	Outcome     Outcome
	Reason      string
	Source      string
	Destination string
	AmountCents int64
	Currency    string
	// ClientID is the record's clienteId; empty when it named none.
	ClientID string
	// RequestEventID is the record's eventoSolicitacaoId: the request
	// event the result answers; uuid.Nil when the record carried none or
	// was decided before the ledger kept it.
	RequestEventID uuid.UUID
	ProcessedAt    time.Time
	// Postings are the transfer's two sides, the credit first; none when
	// rejected, nor for a hold until it is captured.
	Postings []PostingBalance
	// Reservation is a hold's reservation as it is now (Outcome
	// RESERVADA); nil for any other transfer. Its ClosedAt is set once it
	// closed.
	Reservation *Reservation
}

// PostingBalance is one side of a settled transfer with the account's
// balance right after it.
type PostingBalance struct {
	Account      string
	Direction    Direction
	AmountCents  int64
	BalanceAfter int64
	CreatedAt    time.Time
}
