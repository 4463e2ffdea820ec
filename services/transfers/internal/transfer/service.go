package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
)

// AggregateType names transfers in the outbox.
const AggregateType = "transferencia"

// Signer signs what a client asked for (transfersig.Signer, with the
// service's own key).
type Signer interface {
	Sign(transfersig.Claim) *events.Authorization
	SignRefund(transfersig.RefundClaim) *events.Authorization
}

// Service creates transfers, reads them, and takes the commands of holds.
type Service struct {
	store  Store
	topics events.Topics
	signer Signer
	now    func() time.Time
}

// NewService returns a Service that keeps transfers in store and announces
// them on topics.Requested, each signed by signer (the proof, which the
// ledger verifies, that the client named in the event asked for it), and
// a hold's commands on topics.CaptureRequested and topics.CancelRequested.
func NewService(store Store, topics events.Topics, signer Signer) *Service {
	return &Service{store: store, topics: topics, signer: signer, now: time.Now}
}

// Submission is one POST of a transfer.
type Submission struct {
	// ID is the Idempotency-Key, which becomes the transfer id.
	ID uuid.UUID
	// Client is the authenticated client (the token's sub) submitting it.
	Client string
	// RequestID is the id of the HTTP request submitting it, recorded
	// with the transfer for operators; may be empty.
	RequestID string
	Request   Request
	// Response is what the client gets if this submission creates the
	// transfer; it is stored for replays.
	Response Response
}

// Submit creates the transfer s.ID with its TransferenciaSolicitada event,
// idempotently. It is where a request's rules are checked, once, for every
// caller. A hold (captura MANUAL) is stored and announced with its
// captura and expiraEm (DefaultHoldTTL after now when not given). The event carries the authorization of the transfer: the
// service's signature over its id, accounts, amount, currency and client
// (transfersig), made here, where the client is the authenticated one, and
// checked by the ledger before it debits anything. The event carries correlation-id (the transfer id) and, when ctx
// carries a trace (the HTTP middleware continues the caller's traceparent),
// traceparent: the outbox takes it from ctx. It returns the response to
// give and whether it is the replay of an earlier one: the service's one
// idempotency decision, which the HTTP handler's metrics count. Errors: a
// *ValidationError when s.Request breaks a rule (nothing is stored);
// ErrKeyReused when s.ID already belongs to another request body or to
// another client (the same error, so that a key says nothing of who holds
// it); ErrInProgress while another request with s.ID is being processed.
func (s *Service) Submit(ctx context.Context, sub Submission) (resp Response, replayed bool, err error) {
	now := s.now().UTC().Truncate(time.Microsecond) // PostgreSQL keeps microseconds
	// First, so that a body breaking a rule is a 422 whatever else is wrong.
	if err := sub.Request.Validate(now); err != nil {
		return Response{}, false, err
	}
	if sub.ID == uuid.Nil {
		return Response{}, false, errors.New("submit transfer: nil id")
	}
	if sub.Client == "" {
		return Response{}, false, errors.New("submit transfer: no client")
	}
	if s.signer == nil {
		return Response{}, false, errors.New("submit transfer: no authorization key")
	}
	capture, expiresAt := sub.Request.Hold(now)
	t := Transfer{
		ID:          sub.ID,
		Source:      sub.Request.Source,
		Destination: sub.Request.Destination,
		AmountCents: sub.Request.AmountCents,
		Currency:    sub.Request.Currency,
		Status:      StatusPending,
		Capture:     capture,
		ExpiresAt:   expiresAt,
		Client:      sub.Client,
		RequestID:   sub.RequestID,
		CreatedAt:   now,
		UpdatedAt:   now,
	}
	ev := events.Requested{
		EventID:       uuid.New(), // random, as in the seed; the outbox row keeps it
		TransferID:    t.ID,
		SourceAccount: t.Source,
		DestAccount:   t.Destination,
		AmountCents:   t.AmountCents,
		Currency:      t.Currency,
		OccurredAt:    now,
		ClientID:      t.Client,
		ExpiresAt:     t.ExpiresAt,
		Authorization: s.signer.Sign(transfersig.Claim{TransferID: t.ID, Source: t.Source, Destination: t.Destination,
			AmountCents: t.AmountCents, Currency: t.Currency, Client: t.Client,
			Hold: t.Capture == events.CaptureManual, ExpiresAt: t.ExpiresAt}),
	}
	if t.Capture == events.CaptureManual {
		ev.Capture = t.Capture // absent is AUTOMATICA: an immediate transfer's record is as before holds
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return Response{}, false, fmt.Errorf("encode %s: %w", events.TypeRequested, err)
	}
	headers := map[string]string{events.HeaderCorrelationID: t.ID.String()}
	fp := sub.Request.Fingerprint()
	rec, err := s.store.Create(ctx, Creation{
		Transfer:    t,
		Fingerprint: fp,
		Response:    sub.Response,
		Event: events.Message{
			ID:            ev.EventID,
			AggregateType: AggregateType,
			AggregateID:   t.ID.String(),
			Topic:         s.topics.Requested,
			Key:           t.Source,
			Type:          events.TypeRequested,
			Payload:       payload,
			Headers:       headers,
			OccurredAt:    now,
		},
	})
	return answer(rec, err, sub.Client, fp, sub.Response)
}

// Get returns the transfer id as v sees it: ErrNotFound when there is none
// or when v may not read it (another client's transfer is not found, so
// that its existence does not leak).
func (s *Service) Get(ctx context.Context, id uuid.UUID, v Viewer) (Transfer, error) {
	t, err := s.store.Get(ctx, id)
	if err != nil {
		return Transfer{}, err
	}
	if !v.Sees(t) {
		return Transfer{}, fmt.Errorf("get transfer %s: %w", id, ErrNotFound)
	}
	return t, nil
}

// answer is the idempotent answer to a request of client with
// fingerprint fp whose store call returned rec and err: err; created, the
// new response, when the request created its resource (rec nil); the
// stored response, replayed, when the key is bound to this client and
// fingerprint; ErrKeyReused otherwise (the same error for another client
// and another body, so that a key says nothing of who holds it).
func answer(rec *Record, err error, client string, fp [32]byte, created Response) (Response, bool, error) {
	switch {
	case err != nil:
		return Response{}, false, err
	case rec == nil:
		return created, false, nil
	case rec.Client != client || rec.Fingerprint != fp:
		return Response{}, false, ErrKeyReused
	default:
		return rec.Response, true, nil
	}
}
