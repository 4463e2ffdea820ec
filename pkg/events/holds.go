package events

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Event types of holds (CONTRACTS.md section 9). A capture's result is
// TypeSettled, with Settled.AmountCents.
const (
	TypeReserved         = "TransferenciaReservada"
	TypeCaptureRequested = "CapturaSolicitada"
	TypeCancelRequested  = "CancelamentoSolicitado"
	TypeCancelled        = "TransferenciaCancelada"
)

// Capture modes (captura) of a transfer.
const (
	// CaptureAutomatic is the immediate transfer, and what a record
	// without captura means.
	CaptureAutomatic = "AUTOMATICA"
	// CaptureManual is a hold: the ledger reserves the amount, which a
	// capture, a cancellation or the expiry then settles or releases.
	CaptureManual = "MANUAL"
)

// Reasons (motivo) of TransferenciaCancelada.
const (
	ReasonCancelledByClient = "CANCELADA_PELO_CLIENTE"
	ReasonExpired           = "EXPIRADA"
)

// Holds returns the four topics of holds.
func (t Topics) Holds() []string {
	return []string{t.Reserved, t.CaptureRequested, t.CancelRequested, t.Cancelled}
}

// Reserved is the payload of TransferenciaReservada: the ledger reserved
// the amount of a hold on its source account until ExpiresAt.
type Reserved struct {
	EventID     uuid.UUID `json:"eventoId"`
	TransferID  uuid.UUID `json:"transferenciaId"`
	AmountCents int64     `json:"valorEmCentavos"`
	ExpiresAt   time.Time `json:"expiraEm"`
	OccurredAt  time.Time `json:"ocorridoEm"`
	// RequestEventID: as in Settled. Additive.
	RequestEventID uuid.UUID `json:"eventoSolicitacaoId,omitzero"`
}

// CaptureRequested is the payload of CapturaSolicitada: the client asks
// the ledger to settle AmountCents (at most the reserved amount) of a
// hold.
type CaptureRequested struct {
	EventID       uuid.UUID `json:"eventoId"`
	TransferID    uuid.UUID `json:"transferenciaId"`
	SourceAccount string    `json:"contaOrigem"`
	AmountCents   int64     `json:"valorEmCentavos"`
	ClientID      string    `json:"clienteId,omitempty"`
	OccurredAt    time.Time `json:"ocorridoEm"`
}

// CancelRequested is the payload of CancelamentoSolicitado: the client
// asks the ledger to release a hold.
type CancelRequested struct {
	EventID       uuid.UUID `json:"eventoId"`
	TransferID    uuid.UUID `json:"transferenciaId"`
	SourceAccount string    `json:"contaOrigem"`
	ClientID      string    `json:"clienteId,omitempty"`
	OccurredAt    time.Time `json:"ocorridoEm"`
}

// Cancelled is the payload of TransferenciaCancelada: the ledger released
// a hold, at the client's request (ReasonCancelledByClient) or because it
// expired (ReasonExpired).
type Cancelled struct {
	EventID    uuid.UUID `json:"eventoId"`
	TransferID uuid.UUID `json:"transferenciaId"`
	Reason     string    `json:"motivo"`
	OccurredAt time.Time `json:"ocorridoEm"`
	// RequestEventID: as in Settled. Additive.
	RequestEventID uuid.UUID `json:"eventoSolicitacaoId,omitzero"`
}

func (e *Reserved) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(e.AmountCents > 0, "valorEmCentavos"),
		need(!e.ExpiresAt.IsZero(), "expiraEm"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

func (e *CaptureRequested) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(e.SourceAccount != "", "contaOrigem"),
		need(e.AmountCents > 0, "valorEmCentavos"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

func (e *CancelRequested) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(e.SourceAccount != "", "contaOrigem"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

func (e *Cancelled) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(e.Reason == ReasonCancelledByClient || e.Reason == ReasonExpired, "motivo"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

// validCapture checks captura: absent, CaptureAutomatic or CaptureManual.
func validCapture(c string) error {
	if c == "" || c == CaptureAutomatic || c == CaptureManual {
		return nil
	}
	return fmt.Errorf("captura %q is neither %s nor %s", c, CaptureAutomatic, CaptureManual)
}
