package events

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Event types of refunds (CONTRACTS.md section 10).
const (
	TypeRefundRequested = "EstornoSolicitado"
	TypeRefundSettled   = "EstornoLiquidado"
	TypeRefundRejected  = "EstornoRejeitado"
)

// Reasons (motivo) of EstornoRejeitado beside ReasonInsufficientFunds and
// ReasonUnauthorizedSource.
const (
	// ReasonExceedsRefundable: the refund, with the refunds the ledger
	// has settled for the transfer, would exceed what it settled.
	ReasonExceedsRefundable = "VALOR_EXCEDE_ESTORNAVEL"
	// ReasonNotSettled: the ledger settled nothing for the transfer.
	ReasonNotSettled = "TRANSFERENCIA_NAO_LIQUIDADA"
)

// Kinds of the ids derived from a refund's id (DerivedID(kind, estornoId)):
// a refund has one result, whichever it is.
const (
	KindRefundSettled  = "estorno-liquidado"
	KindRefundRejected = "estorno-rejeitado"
)

// Refunds returns the three topics of refunds.
func (t Topics) Refunds() []string {
	return []string{t.RefundRequested, t.RefundSettled, t.RefundRejected}
}

// RefundRequested is the payload of EstornoSolicitado: ClientID asks the
// ledger to return AmountCents of a settled transfer from its destination
// (DestAccount) to its source (SourceAccount). RefundID is the refund's id
// (its Idempotency-Key).
type RefundRequested struct {
	EventID       uuid.UUID `json:"eventoId"`
	RefundID      uuid.UUID `json:"estornoId"`
	TransferID    uuid.UUID `json:"transferenciaId"`
	SourceAccount string    `json:"contaOrigem"`
	DestAccount   string    `json:"contaDestino"`
	AmountCents   int64     `json:"valorEmCentavos"`
	Currency      string    `json:"moeda"`
	ClientID      string    `json:"clienteId,omitempty"`
	OccurredAt    time.Time `json:"ocorridoEm"`
	// Operator is true when ClientID asked as an operator, who may refund
	// any transfer; otherwise ClientID must be the destination's titular.
	// Additive.
	Operator bool `json:"operador,omitempty"`
	// Authorization is the transfers service's signature over the refund
	// id, transfer id, accounts, amount, currency, client and Operator
	// (transfersig.RefundClaim). Additive: without one that verifies the
	// ledger rejects the refund (ORIGEM_NAO_AUTORIZADA).
	Authorization *Authorization `json:"autorizacao,omitempty"`
}

// RefundSettled is the payload of EstornoLiquidado: the ledger posted the
// refund. Its eventoId is DerivedID(KindRefundSettled, RefundID).
type RefundSettled struct {
	EventID     uuid.UUID `json:"eventoId"`
	RefundID    uuid.UUID `json:"estornoId"`
	TransferID  uuid.UUID `json:"transferenciaId"`
	AmountCents int64     `json:"valorEmCentavos"`
	OccurredAt  time.Time `json:"ocorridoEm"`
}

// RefundRejected is the payload of EstornoRejeitado: the ledger posted
// nothing, for Reason. Its eventoId is DerivedID(KindRefundRejected,
// RefundID).
type RefundRejected struct {
	EventID    uuid.UUID `json:"eventoId"`
	RefundID   uuid.UUID `json:"estornoId"`
	TransferID uuid.UUID `json:"transferenciaId"`
	Reason     string    `json:"motivo"`
	OccurredAt time.Time `json:"ocorridoEm"`
}

func (e *RefundRequested) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.RefundID != uuid.Nil, "estornoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(e.SourceAccount != "", "contaOrigem"),
		need(e.DestAccount != "", "contaDestino"),
		need(e.AmountCents > 0, "valorEmCentavos"),
		need(e.Currency != "", "moeda"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

func (e *RefundSettled) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.RefundID != uuid.Nil, "estornoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(e.AmountCents > 0, "valorEmCentavos"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

func (e *RefundRejected) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.RefundID != uuid.Nil, "estornoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(validRefundReason(e.Reason), "motivo"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

func validRefundReason(r string) bool {
	switch r {
	case ReasonInsufficientFunds, ReasonExceedsRefundable, ReasonUnauthorizedSource, ReasonNotSettled:
		return true
	}
	return false
}

// CheckRefundResultID returns nil when eventID is the id derived for
// refundID and the refund result type typ (TypeRefundSettled:
// KindRefundSettled; TypeRefundRejected: KindRefundRejected), otherwise
// an error wrapping ErrMalformed and ErrUnderivedID, as CheckResultID.
func CheckRefundResultID(typ string, eventID, refundID uuid.UUID) error {
	var kind string
	switch typ {
	case TypeRefundSettled:
		kind = KindRefundSettled
	case TypeRefundRejected:
		kind = KindRefundRejected
	default:
		return fmt.Errorf("%w: %w: %s is not a refund result type", ErrMalformed, ErrUnderivedID, typ)
	}
	if DerivedID(kind, refundID) != eventID {
		return fmt.Errorf("%w: %w: %s %s of refund %s", ErrMalformed, ErrUnderivedID, typ, eventID, refundID)
	}
	return nil
}
