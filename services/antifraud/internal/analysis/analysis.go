// Package analysis decides, once per transfer, whether antifraud lets it
// through: it scores a requested transfer with the risk engine, stores the
// decision and enqueues the resulting event (TransferenciaAnalisada or
// TransferenciaRejeitada) in one database transaction.
//
// The decision table is the service's idempotency record: a transfer that
// already has a decision gets nothing new, whatever the rules would say
// now, so a redelivered request never yields a second, different decision
// or a second event. Every decision runs under a per-source-account lock,
// which serialises the velocity check (two concurrent transfers of one
// account cannot both slip under a limit) and the duplicate check (two
// instances handed the same request decide it once).
//
// Velocity history is kept per client and source account: the transfers a
// client requested from an account count toward that client's quota on
// that account only. A client who does not hold an account can request
// transfers from it (the ledger rejects them, ORIGEM_NAO_AUTORIZADA), but
// they never count toward the titular's quota, so they cannot lock the
// titular out. This needs no knowledge of outcomes (no consumer of the
// result topics): the titular's own quota is exactly the account's quota
// of before, since only the titular's transfers can settle.
package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
)

// Outcome is what antifraud decided.
type Outcome string

// Outcomes, as stored in the decision table and used as the outcome label
// of antifraud_decisions_total.
const (
	// Approved: TransferenciaAnalisada goes to the ledger.
	Approved Outcome = "APPROVED"
	// Blocked: TransferenciaRejeitada with BLOQUEADA_ANTIFRAUDE.
	Blocked Outcome = "BLOCKED"
)

// Kinds of derived event ids (the seed's idDerivado).
const (
	kindAnalysed = events.KindAnalysed
	kindRejected = events.KindRejectedAntifraud
)

// Decision is antifraud's verdict on one transfer, as stored.
type Decision struct {
	TransferID     uuid.UUID
	RequestEventID uuid.UUID
	SourceAccount  string
	DestAccount    string
	AmountCents    int64
	Currency       string
	// ClientID is the client that requested the transfer (clienteId); empty
	// when the request named none. Velocity is counted per client and
	// source account.
	ClientID string
	// OccurredAt is when the transfer was requested (the request's
	// ocorridoEm); the velocity window is measured from it.
	OccurredAt time.Time
	Score      int
	// Threshold is the blocking threshold the score was compared with.
	Threshold int
	Outcome   Outcome
	// Rules names the rules that fired, in rule order.
	Rules []string
	// EventID is the id of the event the decision emitted.
	EventID   uuid.UUID
	DecidedAt time.Time
}

// ErrNotFound is returned by the store's Decision when the transfer has no
// decision.
var ErrNotFound = errkind.Errorf(errkind.NotFound, "antifraud has not decided this transfer")

// ErrDuplicate is returned by Tx.InsertAll when a transfer already has a
// decision.
var ErrDuplicate = errors.New("decision already exists")

// Tx is the work of one batch of decisions, all in one database
// transaction, in two round trips whatever the batch size.
type Tx interface {
	// Load locks the source accounts (in one fixed order, so that two
	// batches sharing accounts cannot deadlock) until the transaction
	// ends, so that the decisions of one account are taken one at a time;
	// then it returns the stored decisions of transfers and, for each
	// query, the summary of the approved transfers that client requested
	// from that account and that occurred after since. The three
	// statements go in one round trip.
	Load(ctx context.Context, accounts []string, transfers []uuid.UUID, history []HistoryQuery) (map[uuid.UUID]Decision, []risk.History, error)
	// InsertAll stores ds and writes msgs, their events, to the outbox in
	// one round trip; it returns ErrDuplicate, and the caller rolls back,
	// if any transfer of ds already has a decision.
	InsertAll(ctx context.Context, ds []Decision, msgs []events.Message) error
}

// HistoryQuery asks for the history of one client on one account since a
// time (Tx.History's arguments).
type HistoryQuery struct {
	Account string
	Client  string
	Since   time.Time
}

// Store runs transactions. InTx commits when fn returns nil and rolls back
// otherwise; it may run fn again after a serialization failure.
type Store interface {
	InTx(ctx context.Context, fn func(tx Tx) error) error
}

// Result is what Analyse did.
type Result struct {
	Decision Decision
	// Duplicate reports that the decision already existed: nothing new was
	// stored or enqueued.
	Duplicate bool
	// Explanation tells how a new decision's score came about; empty for a
	// duplicate.
	Explanation string
}

// Service takes antifraud decisions.
type Service struct {
	store   Store
	engine  *risk.Engine
	topics  events.Topics
	metrics *Metrics
	now     func() time.Time
}

// NewService returns a service deciding with engine, storing with store and
// emitting to topics. metrics may be nil.
func NewService(store Store, engine *risk.Engine, topics events.Topics, metrics *Metrics) *Service {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	metrics.init(engine)
	return &Service{store: store, engine: engine, topics: topics, metrics: metrics, now: time.Now}
}

// Analyse decides req once: it is AnalyseBatch of one request. If the
// transfer already has a decision, it returns it with Duplicate set and
// changes nothing. Otherwise, in one transaction holding the source
// account's lock, it scores the transfer against the account's approved
// history within the velocity window, stores the decision and enqueues
// TransferenciaAnalisada (score below the threshold) or
// TransferenciaRejeitada with BLOQUEADA_ANTIFRAUDE. The velocity history is
// that of the requesting client on the source account (see the package
// comment), and TransferenciaAnalisada carries the request's clienteId and
// autorizacao on to the ledger, unchanged. The outgoing event carries correlation-id = transfer id,
// and the outbox gives it the trace context of ctx. req must have passed
// events.Decode.
func (s *Service) Analyse(ctx context.Context, req events.Requested) (Result, error) {
	reqs := []Request{{Transfer: req}}
	res, err := s.AnalyseBatch(ctx, reqs)
	if errors.Is(err, ErrDuplicate) {
		// Only when the same transfer id arrives at the same time with
		// another contaOrigem (hence another lock): the winner's decision
		// is committed by now, and the second run returns it as a
		// duplicate, emitting nothing.
		res, err = s.AnalyseBatch(ctx, reqs)
	}
	if err != nil {
		return Result{}, fmt.Errorf("analyse transfer %s: %w", req.TransferID, err)
	}
	return res[0], nil
}

// windowStart is where the velocity window of req begins. The window ends
// at the request's time, so that a backlog processed late is judged as it
// happened; a time in the future (clock skew) counts as now, so it cannot
// shrink the history.
func (s *Service) windowStart(req events.Requested, w time.Duration) time.Time {
	ref := req.OccurredAt
	if now := s.now(); ref.After(now) {
		ref = now
	}
	return ref.Add(-w)
}

// Request is one requested transfer of a batch and the traceparent of its
// record.
type Request struct {
	Transfer events.Requested
	// Traceparent is the W3C trace context of the record. Trace context
	// travels in ctx everywhere else; a batch is the one exception: its
	// records belong to as many traces, and one ctx cannot carry them, so
	// each record's goes with it into its event's headers.
	Traceparent string
}

// AnalyseBatch decides reqs, in their order, in one transaction, and
// returns what Analyse called on each in turn would have returned: the
// locks of all the source accounts are taken first, the stored decisions
// and the velocity histories are read once for the batch, and a transfer's
// history also counts the transfers approved before it in the batch (one
// by one, they would have been stored by then). The decisions are stored
// and their events enqueued with one statement each. All or nothing: on
// any error nothing is stored; in particular ErrDuplicate, when a
// concurrent instance decided one of the transfers under another source
// account's lock, for the caller to decide them one by one (Analyse).
func (s *Service) AnalyseBatch(ctx context.Context, reqs []Request) ([]Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	w := s.engine.Window()
	var res []Result
	err := s.store.InTx(ctx, func(tx Tx) error {
		res = make([]Result, len(reqs)) // the closure may run again
		var (
			accounts = make([]string, 0, len(reqs))
			locked   = map[string]bool{}
			ids      = make([]uuid.UUID, len(reqs))
			queries  []HistoryQuery
		)
		for i, r := range reqs {
			if a := r.Transfer.SourceAccount; !locked[a] {
				locked[a] = true
				accounts = append(accounts, a)
			}
			ids[i] = r.Transfer.TransferID
			if w > 0 {
				queries = append(queries, HistoryQuery{Account: r.Transfer.SourceAccount,
					Client: r.Transfer.ClientID, Since: s.windowStart(r.Transfer, w)})
			}
		}
		stored, history, err := tx.Load(ctx, accounts, ids, queries)
		if err != nil {
			return err
		}
		type owner struct{ account, client string }
		var (
			approved = map[owner][]Decision{} // approved earlier in this batch
			decided  = map[uuid.UUID]Decision{}
			ds       []Decision
			msgs     []events.Message
		)
		for i, r := range reqs {
			req := r.Transfer
			if d, ok := stored[req.TransferID]; ok {
				res[i] = Result{Decision: d, Duplicate: true}
				continue
			}
			if d, ok := decided[req.TransferID]; ok {
				res[i] = Result{Decision: d, Duplicate: true}
				continue
			}
			in := risk.Input{Transfer: risk.Transfer{
				SourceAccount: req.SourceAccount,
				DestAccount:   req.DestAccount,
				AmountCents:   req.AmountCents,
				Currency:      req.Currency,
			}}
			k := owner{req.SourceAccount, req.ClientID}
			if w > 0 {
				in.History = history[i]
				// The database compares microseconds (what it stores).
				since := queries[i].Since.Truncate(time.Microsecond)
				for _, d := range approved[k] {
					if d.OccurredAt.After(since) {
						in.History.Count++
						in.History.AmountCents = addCapped(in.History.AmountCents, d.AmountCents)
					}
				}
			}
			a := s.engine.Assess(in)
			d := s.decision(req, a)
			msg, err := s.event(d, req, r.Traceparent)
			if err != nil {
				return err
			}
			ds, msgs = append(ds, d), append(msgs, msg)
			decided[req.TransferID] = d
			if d.Outcome == Approved {
				approved[k] = append(approved[k], d)
			}
			res[i] = Result{Decision: d, Explanation: a.Explain(s.engine.Base())}
		}
		if len(ds) == 0 {
			return nil
		}
		return tx.InsertAll(ctx, ds, msgs)
	})
	if err != nil {
		return nil, fmt.Errorf("analyse %d transfers: %w", len(reqs), err)
	}
	for _, r := range res {
		if r.Duplicate {
			s.metrics.Duplicates.Inc()
		} else {
			s.metrics.observe(r.Decision)
		}
	}
	return res, nil
}

// addCapped is a+b for non-negative a and b, at most math.MaxInt64, as the
// history query caps its sum.
func addCapped(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func (s *Service) decision(req events.Requested, a risk.Assessment) Decision {
	d := Decision{
		TransferID:     req.TransferID,
		RequestEventID: req.EventID,
		SourceAccount:  req.SourceAccount,
		DestAccount:    req.DestAccount,
		AmountCents:    req.AmountCents,
		Currency:       req.Currency,
		ClientID:       req.ClientID,
		OccurredAt:     req.OccurredAt.UTC().Truncate(time.Microsecond),
		Score:          a.Score,
		Threshold:      s.engine.Threshold(),
		Outcome:        Approved,
		Rules:          a.RuleNames(),
		EventID:        events.DerivedID(kindAnalysed, req.TransferID),
		// PostgreSQL keeps microseconds: the returned decision equals the
		// stored one.
		DecidedAt: s.now().UTC().Truncate(time.Microsecond),
	}
	if a.Block {
		d.Outcome = Blocked
		d.EventID = events.DerivedID(kindRejected, req.TransferID)
	}
	return d
}

// event builds the event announcing d for req. TransferenciaAnalisada
// carries req's authorization unchanged for the ledger to verify (antifraud
// neither checks nor keeps it), and its captura and expiraEm, which it covers. traceparent is a batch record's own trace
// context (Request.Traceparent), "" for a single record, whose context
// the outbox takes from ctx.
func (s *Service) event(d Decision, req events.Requested, traceparent string) (events.Message, error) {
	m := events.Message{
		ID:            d.EventID,
		AggregateType: "transfer",
		AggregateID:   d.TransferID.String(),
		Key:           d.SourceAccount,
		Headers:       map[string]string{events.HeaderCorrelationID: d.TransferID.String()},
		OccurredAt:    d.DecidedAt,
	}
	if traceparent != "" {
		m.Headers[events.HeaderTraceparent] = traceparent
	}
	var payload any
	switch d.Outcome {
	case Approved:
		m.Topic, m.Type = s.topics.Analysed, events.TypeAnalysed
		payload = events.Analysed{
			EventID:       d.EventID,
			TransferID:    d.TransferID,
			SourceAccount: d.SourceAccount,
			DestAccount:   d.DestAccount,
			AmountCents:   d.AmountCents,
			Currency:      d.Currency,
			RiskScore:     d.Score,
			OccurredAt:    d.DecidedAt,
			ClientID:      d.ClientID,
			Authorization: req.Authorization,
			Capture:       req.Capture,
			ExpiresAt:     req.ExpiresAt,
			// The binding to the request decided, carried on to the ledger.
			RequestEventID: d.RequestEventID,
		}
	case Blocked:
		m.Topic, m.Type = s.topics.Rejected, events.TypeRejected
		payload = events.Rejected{
			EventID:    d.EventID,
			TransferID: d.TransferID,
			Reason:     events.ReasonBlockedByAntifraud,
			OccurredAt: d.DecidedAt,
			// The binding to the request decided (events.Rejected).
			RequestEventID: d.RequestEventID,
		}
	default:
		return events.Message{}, fmt.Errorf("unknown outcome %q", d.Outcome)
	}
	var err error
	if m.Payload, err = json.Marshal(payload); err != nil {
		return events.Message{}, fmt.Errorf("encode %s: %w", m.Type, err)
	}
	return m, nil
}
