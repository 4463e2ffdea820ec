package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/pkg/validate"
)

// RefundStatus is the state of a refund (wire names of CONTRACTS.md
// section 10): PENDENTE, then LIQUIDADO or REJEITADO, both terminal.
type RefundStatus string

// The statuses of a refund.
const (
	RefundPending  RefundStatus = "PENDENTE"
	RefundSettled  RefundStatus = "LIQUIDADO"
	RefundRejected RefundStatus = "REJEITADO"
)

// RefundAggregateType names refunds in the outbox: a refund's event is
// filed under its own id.
const RefundAggregateType = "estorno"

// The kinds of the refunds' own problems (pkg/httpapi writes each with its
// base kind's status).
var (
	KindNotSettled      = errkind.Refine(errkind.Conflict, "transfer-not-settled", "Transfer not settled")
	KindRefundExceeds   = errkind.Refine(errkind.Validation, "refund-exceeds-refundable", "Refund exceeds what remains refundable")
	ErrNotSettled       = errkind.Errorf(KindNotSettled, "the transfer is not LIQUIDADA: only a settled transfer can be refunded")
	ErrRefundNotFound   = errkind.Errorf(errkind.NotFound, "no refund with this id for this transfer")
	errIncompleteRefund = errors.New("refund: incomplete submission")
)

// Refund is a refund as stored and shown.
type Refund struct {
	ID          uuid.UUID
	TransferID  uuid.UUID
	AmountCents int64
	Status      RefundStatus
	// Reason is the ledger's motivo of a rejection; empty otherwise.
	Reason string
	// Client is the client (the token's sub) that asked for it.
	Client    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// RefundSubmission is one POST of a refund.
type RefundSubmission struct {
	// ID is the Idempotency-Key: the refund's id.
	ID         uuid.UUID
	TransferID uuid.UUID
	// AmountCents is what to refund: nil means all that remains
	// refundable.
	AmountCents *int64
	// Client is the authenticated client (the token's sub); Operator
	// whether it holds the operacoes scope, which refunds any transfer.
	Client   string
	Operator bool
	// Response is what the client gets if this submission creates the
	// refund; it is stored for replays.
	Response Response
}

// Fingerprint is the SHA-256 of the refund's canonical form: transfer id
// and amount (-1: none given, all that remains).
func (r RefundSubmission) Fingerprint() [32]byte {
	f := newCanonical()
	f.str("ESTORNO")
	f.str(r.TransferID.String())
	f.optional(r.AmountCents)
	return f.sum()
}

// RefundCreation is what accepting a refund writes in its one
// transaction: the refund row (with its idempotency record) and its
// EstornoSolicitado event, for the outbox.
type RefundCreation struct {
	Refund      Refund
	Fingerprint [32]byte
	Response    Response
	Event       events.Message
}

// RefundResult is the ledger's outcome of a refund to project: settled
// (with the amount it posted) or rejected (with its motivo).
type RefundResult struct {
	EventID     uuid.UUID
	RefundID    uuid.UUID
	TransferID  uuid.UUID
	Status      RefundStatus
	Reason      string
	AmountCents int64
}

// Settled is what a settled transfer moved: a captured hold's captured
// amount, else its whole amount.
func (t Transfer) Settled() int64 {
	if t.SettledCents > 0 {
		return t.SettledCents
	}
	return t.AmountCents
}

// Refund accepts a refund of a settled transfer, idempotently: in one
// transaction with its EstornoSolicitado event (key contaOrigem, with
// clienteId, operador and the service's signature over them,
// transfersig.RefundClaim) to the ledger, under the
// transfer's lock, so that the refunds not rejected never exceed what the
// transfer settled. It returns the response to give and whether it
// replays an earlier one. Errors, each changing nothing: a
// *ValidationError for an amount outside 1..10^15; ErrKeyReused when
// sub.ID names another refund or another client's; ErrInProgress while a
// request with sub.ID is being processed; ErrNotFound when the transfer
// does not exist or the client is neither its destination's titular nor
// an operator; ErrNotSettled when it is not LIQUIDADA; KindRefundExceeds
// when the amount (or, with none, nothing) remains refundable.
func (s *Service) Refund(ctx context.Context, sub RefundSubmission) (resp Response, replayed bool, err error) {
	if sub.AmountCents != nil && !validate.AmountCents(*sub.AmountCents) {
		return Response{}, false, &validate.ValidationError{Detail: "the refund breaks the rules of its fields",
			Fields: []errkind.FieldError{{Field: "valorEmCentavos", Message: validate.AmountRule}}}
	}
	if sub.ID == uuid.Nil || sub.Client == "" || s.signer == nil {
		return Response{}, false, errIncompleteRefund
	}
	fp := sub.Fingerprint()
	rec, err := s.store.Refund(ctx, sub.ID, sub.TransferID, func(t Transfer, committed int64) (RefundCreation, error) {
		return s.decideRefund(sub, fp, t, committed)
	})
	return answer(rec, err, sub.Client, fp, sub.Response)
}

// decideRefund checks sub against t, the transfer as locked, whose
// refunds not rejected sum to committed, and builds what accepting it
// writes.
func (s *Service) decideRefund(sub RefundSubmission, fp [32]byte, t Transfer, committed int64) (RefundCreation, error) {
	if !sub.Operator && (t.DestHolder == "" || t.DestHolder != sub.Client) {
		return RefundCreation{}, fmt.Errorf("refund of transfer %s: %w", t.ID, ErrNotFound)
	}
	if t.Status != StatusSettled {
		return RefundCreation{}, ErrNotSettled
	}
	remaining := t.Settled() - committed
	amount := remaining
	if sub.AmountCents != nil {
		amount = *sub.AmountCents
	}
	if amount <= 0 || amount > remaining {
		return RefundCreation{}, &errkind.Error{Kind: KindRefundExceeds, Detail: "the refund exceeds what remains refundable of the transfer",
			Fields: []errkind.FieldError{{Field: "valorEmCentavos", Message: fmt.Sprintf("must be at most %d, what remains refundable", max(remaining, 0))}}}
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	ev := events.RefundRequested{EventID: uuid.New(), RefundID: sub.ID, TransferID: t.ID, SourceAccount: t.Source,
		DestAccount: t.Destination, AmountCents: amount, Currency: t.Currency, ClientID: sub.Client, OccurredAt: now,
		Operator: sub.Operator,
		Authorization: s.signer.SignRefund(transfersig.RefundClaim{RefundID: sub.ID, TransferID: t.ID, Source: t.Source,
			Destination: t.Destination, AmountCents: amount, Currency: t.Currency, Client: sub.Client, Operator: sub.Operator})}
	payload, err := json.Marshal(ev)
	if err != nil {
		return RefundCreation{}, fmt.Errorf("encode %s: %w", events.TypeRefundRequested, err)
	}
	return RefundCreation{
		Refund: Refund{ID: sub.ID, TransferID: t.ID, AmountCents: amount, Status: RefundPending, Client: sub.Client,
			CreatedAt: now, UpdatedAt: now},
		Fingerprint: fp, Response: sub.Response,
		Event: events.Message{
			ID: ev.EventID, AggregateType: RefundAggregateType, AggregateID: sub.ID.String(), Topic: s.topics.RefundRequested,
			Key: t.Source, Type: events.TypeRefundRequested, Payload: payload,
			Headers: map[string]string{events.HeaderCorrelationID: t.ID.String()}, OccurredAt: now,
		},
	}, nil
}

// GetRefund returns the refund refundID of transfer transferID as v sees
// it: ErrRefundNotFound when there is none, when it is another transfer's,
// or when v is neither its creator, the transfer's destination titular
// nor an operator.
func (s *Service) GetRefund(ctx context.Context, transferID, refundID uuid.UUID, v Viewer) (Refund, error) {
	r, err := s.store.GetRefund(ctx, refundID)
	if errors.Is(err, ErrRefundNotFound) || (err == nil && r.TransferID != transferID) {
		return Refund{}, fmt.Errorf("get refund %s: %w", refundID, ErrRefundNotFound)
	}
	if err != nil {
		return Refund{}, err
	}
	if v.All || (v.Client != "" && v.Client == r.Client) {
		return r, nil
	}
	t, err := s.store.Get(ctx, transferID)
	if err != nil {
		return Refund{}, err
	}
	if v.Client == "" || t.DestHolder != v.Client {
		return Refund{}, fmt.Errorf("get refund %s: %w", refundID, ErrRefundNotFound)
	}
	return r, nil
}
