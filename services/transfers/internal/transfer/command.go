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
	"github.com/paysuite/payments/pkg/validate"
)

// CommandKind is what a command asks of a hold (wire names of the
// comando_transferencia table).
type CommandKind string

// The commands of a hold (CONTRACTS.md section 9).
const (
	CommandCapture CommandKind = "CAPTURA"
	CommandCancel  CommandKind = "CANCELAMENTO"
)

// The kinds of the commands' own problems (pkg/httpapi writes each with
// its base kind's status).
var (
	KindNotReserved       = errkind.Refine(errkind.Conflict, "transfer-not-reserved", "Transfer not reserved")
	KindCommandInProgress = errkind.Refine(errkind.Conflict, "command-in-progress", "Command in progress")
	KindCaptureExceeds    = errkind.Refine(errkind.Validation, "capture-exceeds-reservation", "Capture exceeds the reservation")
)

// Errors of the commands.
var (
	// ErrNotReserved: the transfer is not RESERVADA (not a hold, not
	// reserved yet, or already captured, cancelled or expired).
	ErrNotReserved = errkind.Errorf(KindNotReserved, "the transfer is not RESERVADA: only a reserved hold can be captured or cancelled")
	// ErrCommandInProgress: a capture or cancellation of the transfer was
	// accepted and its result has not arrived yet.
	ErrCommandInProgress = errkind.Errorf(KindCommandInProgress,
		"a capture or cancellation of this transfer is in progress; its result will show in the transfer's status")
)

// CommandSubmission is one POST of a capture or a cancellation.
type CommandSubmission struct {
	// ID is the Idempotency-Key: it names the command, not the transfer.
	ID         uuid.UUID
	TransferID uuid.UUID
	Kind       CommandKind
	// AmountCents is what to capture: nil means the whole reservation.
	// Always nil for a cancellation.
	AmountCents *int64
	// Client is the authenticated client (the token's sub).
	Client string
	// Render is the response to give, and store for replays, when the
	// command is accepted for the transfer t.
	Render func(t Transfer) (Response, error)
}

// Fingerprint is the SHA-256 of the command's canonical form: kind,
// transfer id and amount (-1: none given, the whole reservation).
func (c CommandSubmission) Fingerprint() [32]byte {
	f := newCanonical()
	f.str(string(c.Kind))
	f.str(c.TransferID.String())
	f.optional(c.AmountCents)
	return f.sum()
}

// CommandCreation is what accepting a command writes in its one
// transaction: the command row (with its idempotency record) and its
// event, for the outbox.
type CommandCreation struct {
	ID          uuid.UUID
	TransferID  uuid.UUID
	Kind        CommandKind
	AmountCents int64 // the amount to capture; 0 for a cancellation
	Client      string
	Fingerprint [32]byte
	Response    Response
	Event       events.Message
}

// Command accepts a capture or cancellation of a hold, idempotently: in
// one transaction with its CapturaSolicitada or CancelamentoSolicitado
// event (key contaOrigem, with clienteId) to the ledger. It returns the
// response to give and whether it replays an earlier one. Errors, each
// changing nothing: a *ValidationError for a capture amount outside
// 1..10^15;
// ErrKeyReused when sub.ID names another command or another client's;
// ErrInProgress while a request with sub.ID is being processed; ErrNotFound
// when the transfer does not exist or the client did not create it;
// ErrNotReserved when it is not RESERVADA; ErrCommandInProgress when it
// already has a command; KindCaptureExceeds when the amount exceeds the
// reservation.
func (s *Service) Command(ctx context.Context, sub CommandSubmission) (resp Response, replayed bool, err error) {
	if sub.AmountCents != nil && !validate.AmountCents(*sub.AmountCents) {
		return Response{}, false, &validate.ValidationError{Detail: "the capture breaks the rules of its fields",
			Fields: []errkind.FieldError{{Field: "valorEmCentavos", Message: validate.AmountRule}}}
	}
	if sub.ID == uuid.Nil || sub.Client == "" || sub.Render == nil || (sub.Kind != CommandCapture && sub.Kind != CommandCancel) {
		return Response{}, false, errors.New("transfer command: incomplete submission")
	}
	if sub.Kind == CommandCancel && sub.AmountCents != nil {
		return Response{}, false, errors.New("transfer command: a cancellation has no amount")
	}
	fp := sub.Fingerprint()
	var created Response
	rec, err := s.store.Command(ctx, sub.ID, sub.TransferID, func(t Transfer) (CommandCreation, error) {
		c, err := s.decideCommand(sub, fp, t)
		created = c.Response
		return c, err
	})
	return answer(rec, err, sub.Client, fp, created)
}

// decideCommand checks sub against t, the transfer as locked, and builds
// what accepting it writes.
func (s *Service) decideCommand(sub CommandSubmission, fp [32]byte, t Transfer) (CommandCreation, error) {
	if t.Client == "" || t.Client != sub.Client {
		return CommandCreation{}, fmt.Errorf("command on transfer %s: %w", t.ID, ErrNotFound)
	}
	if t.Status != StatusReserved {
		return CommandCreation{}, ErrNotReserved
	}
	var amount int64
	if sub.Kind == CommandCapture {
		amount = t.AmountCents
		if sub.AmountCents != nil {
			amount = *sub.AmountCents
		}
		if amount > t.AmountCents {
			return CommandCreation{}, &errkind.Error{Kind: KindCaptureExceeds, Detail: "the capture exceeds the amount reserved",
				Fields: []errkind.FieldError{{Field: "valorEmCentavos", Message: fmt.Sprintf("must be at most %d, the amount reserved", t.AmountCents)}}}
		}
	}
	resp, err := sub.Render(t)
	if err != nil {
		return CommandCreation{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	eventID := uuid.New() // random, as a request's; the outbox row keeps it
	var typ, topic string
	var ev any
	if sub.Kind == CommandCapture {
		typ, topic = events.TypeCaptureRequested, s.topics.CaptureRequested
		ev = events.CaptureRequested{EventID: eventID, TransferID: t.ID, SourceAccount: t.Source, AmountCents: amount,
			ClientID: sub.Client, OccurredAt: now}
	} else {
		typ, topic = events.TypeCancelRequested, s.topics.CancelRequested
		ev = events.CancelRequested{EventID: eventID, TransferID: t.ID, SourceAccount: t.Source, ClientID: sub.Client, OccurredAt: now}
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return CommandCreation{}, fmt.Errorf("encode %s: %w", typ, err)
	}
	return CommandCreation{
		ID: sub.ID, TransferID: t.ID, Kind: sub.Kind, AmountCents: amount, Client: sub.Client, Fingerprint: fp, Response: resp,
		Event: events.Message{
			ID: eventID, AggregateType: AggregateType, AggregateID: t.ID.String(), Topic: topic, Key: t.Source,
			Type: typ, Payload: payload, Headers: map[string]string{events.HeaderCorrelationID: t.ID.String()}, OccurredAt: now,
		},
	}, nil
}
