// Package events holds the wire contracts of the suite: topic names, event
// types, payloads, record headers and reasons, exactly as CONTRACTS.md fixes
// them. Wire names are Portuguese; Go names are English.
package events

import (
	"crypto/md5" //nolint:gosec // name-based UUID v3 is defined over MD5; an id, not security.
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Event types, carried in the evento-tipo header.
const (
	TypeRequested = "TransferenciaSolicitada"
	TypeAnalysed  = "TransferenciaAnalisada"
	TypeSettled   = "TransferenciaLiquidada"
	TypeRejected  = "TransferenciaRejeitada"
)

// Record header names.
const (
	HeaderEventID       = "evento-id"
	HeaderEventType     = "evento-tipo"
	HeaderTraceparent   = "traceparent"
	HeaderCorrelationID = "correlation-id"
)

// Rejection reasons (motivo).
const (
	ReasonBlockedByAntifraud = "BLOQUEADA_ANTIFRAUDE"
	ReasonAccountNotFound    = "CONTA_INEXISTENTE"
	ReasonCurrencyMismatch   = "MOEDA_INCOMPATIVEL"
	ReasonInsufficientFunds  = "SALDO_INSUFICIENTE"
	// ReasonUnauthorizedSource: the transfer's client is not the titular of
	// the source account, or the record names no client (CONTRACTS.md
	// section 8).
	ReasonUnauthorizedSource = "ORIGEM_NAO_AUTORIZADA"
)

// Topics names the suite's topics. Production uses DefaultTopics; tests use
// unique names so that parallel tests never share a topic.
type Topics struct {
	Requested string // pagamentos.transferencia.solicitada.v1
	Analysed  string // pagamentos.transferencia.analisada.v1
	Settled   string // pagamentos.transferencia.liquidada.v1
	Rejected  string // pagamentos.transferencia.rejeitada.v1
	// The topics of holds (CONTRACTS.md section 9).
	Reserved         string // pagamentos.transferencia.reservada.v1
	CaptureRequested string // pagamentos.transferencia.captura-solicitada.v1
	CancelRequested  string // pagamentos.transferencia.cancelamento-solicitado.v1
	Cancelled        string // pagamentos.transferencia.cancelada.v1
	// The topics of refunds (CONTRACTS.md section 10).
	RefundRequested string // pagamentos.estorno.solicitado.v1
	RefundSettled   string // pagamentos.estorno.liquidado.v1
	RefundRejected  string // pagamentos.estorno.rejeitado.v1
}

// DefaultTopics are the topic names of CONTRACTS.md section 3.
var DefaultTopics = Topics{
	Requested: "pagamentos.transferencia.solicitada.v1",
	Analysed:  "pagamentos.transferencia.analisada.v1",
	Settled:   "pagamentos.transferencia.liquidada.v1",
	Rejected:  "pagamentos.transferencia.rejeitada.v1",

	Reserved:         "pagamentos.transferencia.reservada.v1",
	CaptureRequested: "pagamentos.transferencia.captura-solicitada.v1",
	CancelRequested:  "pagamentos.transferencia.cancelamento-solicitado.v1",
	Cancelled:        "pagamentos.transferencia.cancelada.v1",

	RefundRequested: "pagamentos.estorno.solicitado.v1",
	RefundSettled:   "pagamentos.estorno.liquidado.v1",
	RefundRejected:  "pagamentos.estorno.rejeitado.v1",
}

// WithSuffix returns the topics with suffix appended to every name.
func (t Topics) WithSuffix(suffix string) Topics {
	return Topics{
		Requested: t.Requested + suffix,
		Analysed:  t.Analysed + suffix,
		Settled:   t.Settled + suffix,
		Rejected:  t.Rejected + suffix,

		Reserved:         t.Reserved + suffix,
		CaptureRequested: t.CaptureRequested + suffix,
		CancelRequested:  t.CancelRequested + suffix,
		Cancelled:        t.Cancelled + suffix,

		RefundRequested: t.RefundRequested + suffix,
		RefundSettled:   t.RefundSettled + suffix,
		RefundRejected:  t.RefundRejected + suffix,
	}
}

// All returns the four main topics of CONTRACTS.md section 3; the topics
// of holds are Holds, those of refunds Refunds.
func (t Topics) All() []string {
	return []string{t.Requested, t.Analysed, t.Settled, t.Rejected}
}

// DLT returns the dead-letter topic of topic.
func DLT(topic string) string { return topic + DLTSuffix }

// DLTSuffix ends the name of every dead-letter topic (DLT).
const DLTSuffix = "-dlt"

// MainOfDLT returns the main topic whose dead-letter topic dlt is, by the
// naming rule of DLT (<topic>-dlt holds the dead letters of <topic>); ok
// is false when dlt is not named as a dead-letter topic.
func MainOfDLT(dlt string) (main string, ok bool) {
	main, ok = strings.CutSuffix(dlt, DLTSuffix)
	return main, ok && main != ""
}

// Requested is the payload of TransferenciaSolicitada.
type Requested struct {
	EventID       uuid.UUID `json:"eventoId"`
	TransferID    uuid.UUID `json:"transferenciaId"`
	SourceAccount string    `json:"contaOrigem"`
	DestAccount   string    `json:"contaDestino"`
	AmountCents   int64     `json:"valorEmCentavos"`
	Currency      string    `json:"moeda"`
	OccurredAt    time.Time `json:"ocorridoEm"`
	// ClientID is the client (the token's sub) that requested the transfer.
	// Additive (CONTRACTS.md section 8): records of older producers have
	// none, and the ledger rejects them unless LEDGER_OWNERSHIP=off.
	ClientID string `json:"clienteId,omitempty"`
	// Authorization is the transfers service's signature over what
	// ClientID asked for (pkg/transfersig). Additive: without it, or
	// with one that does not verify, the ledger debits nothing.
	Authorization *Authorization `json:"autorizacao,omitempty"`
	// Capture and ExpiresAt make the transfer a hold (CONTRACTS.md
	// section 9): captura is CaptureAutomatic (or absent: an immediate
	// transfer) or CaptureManual, expiraEm when the ledger releases the
	// hold by itself. Additive.
	Capture   string    `json:"captura,omitempty"`
	ExpiresAt time.Time `json:"expiraEm,omitzero"`
}

// Analysed is the payload of TransferenciaAnalisada.
type Analysed struct {
	EventID       uuid.UUID `json:"eventoId"`
	TransferID    uuid.UUID `json:"transferenciaId"`
	SourceAccount string    `json:"contaOrigem"`
	DestAccount   string    `json:"contaDestino"`
	AmountCents   int64     `json:"valorEmCentavos"`
	Currency      string    `json:"moeda"`
	RiskScore     int       `json:"scoreRisco"`
	OccurredAt    time.Time `json:"ocorridoEm"`
	// ClientID is copied from the TransferenciaSolicitada: the client the
	// ledger checks against the source account's titular. Additive.
	ClientID string `json:"clienteId,omitempty"`
	// Authorization is copied unchanged from the TransferenciaSolicitada:
	// the ledger verifies it before anything else. Additive.
	Authorization *Authorization `json:"autorizacao,omitempty"`
	// RequestEventID is the eventoId of the TransferenciaSolicitada this
	// analysis was decided for (the binding, see Settled). Additive.
	RequestEventID uuid.UUID `json:"eventoSolicitacaoId,omitzero"`
	// Capture and ExpiresAt are copied from the TransferenciaSolicitada:
	// with CaptureManual the ledger reserves instead of posting. Additive.
	Capture   string    `json:"captura,omitempty"`
	ExpiresAt time.Time `json:"expiraEm,omitzero"`
}

// Authorization is the proof that a client asked for a transfer: the
// transfers service's Ed25519 signature over the transfer id, accounts,
// amount, currency and client (pkg/transfersig defines the signed
// bytes), made with a key that no Kafka principal or database role holds.
type Authorization struct {
	// KeyID names the signing key (its JWK kid), so that the ledger can
	// hold two keys during a rotation.
	KeyID string `json:"chaveId"`
	// Signature is the Ed25519 signature, base64url without padding.
	Signature string `json:"assinatura"`
}

// Settled is the payload of TransferenciaLiquidada.
type Settled struct {
	EventID    uuid.UUID `json:"eventoId"`
	TransferID uuid.UUID `json:"transferenciaId"`
	OccurredAt time.Time `json:"ocorridoEm"`
	// RequestEventID binds the result to the request it was decided for:
	// the eventoId of that TransferenciaSolicitada, carried through
	// TransferenciaAnalisada. The transfers projection applies a result only
	// to the transfer created with that request event. Additive: uuid.Nil
	// (absent) for older producers and the reference design.
	RequestEventID uuid.UUID `json:"eventoSolicitacaoId,omitzero"`
	// AmountCents is the amount a hold's capture moved (valorEmCentavos,
	// CONTRACTS.md section 9); absent (0) for an immediate transfer,
	// which moves the amount it asked. Additive.
	AmountCents int64 `json:"valorEmCentavos,omitempty"`
	// DestHolder is the titular (client id) of the destination account
	// (titularDestino, CONTRACTS.md section 10): the client who may
	// refund the transfer and who sees it in its history. Additive:
	// empty for older producers and accounts without a titular.
	DestHolder string `json:"titularDestino,omitempty"`
}

// Rejected is the payload of TransferenciaRejeitada.
type Rejected struct {
	EventID    uuid.UUID `json:"eventoId"`
	TransferID uuid.UUID `json:"transferenciaId"`
	Reason     string    `json:"motivo"`
	OccurredAt time.Time `json:"ocorridoEm"`
	// RequestEventID: as in Settled. Additive.
	RequestEventID uuid.UUID `json:"eventoSolicitacaoId,omitzero"`
}

// ErrMalformed marks a payload that cannot be decoded or misses a required
// field: a poison message, never retried.
var ErrMalformed = errors.New("malformed event")

// Decode unmarshals a payload into v and checks its required fields. Unknown
// fields are ignored (forward compatibility). Errors wrap ErrMalformed.
func Decode(data []byte, v interface{ validate() error }) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := v.validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

func (e *Requested) validate() error {
	return firstErr(transferFields(e.EventID, e.TransferID, e.SourceAccount, e.DestAccount, e.AmountCents, e.Currency, e.OccurredAt),
		validCapture(e.Capture))
}

func (e *Analysed) validate() error {
	return firstErr(transferFields(e.EventID, e.TransferID, e.SourceAccount, e.DestAccount, e.AmountCents, e.Currency, e.OccurredAt),
		validCapture(e.Capture))
}

// transferFields checks the fields a request and its analysis both carry.
func transferFields(eventID, transferID uuid.UUID, source, dest string, cents int64, currency string, at time.Time) error {
	return firstErr(
		need(eventID != uuid.Nil, "eventoId"),
		need(transferID != uuid.Nil, "transferenciaId"),
		need(source != "", "contaOrigem"),
		need(dest != "", "contaDestino"),
		need(cents > 0, "valorEmCentavos"),
		need(currency != "", "moeda"),
		need(!at.IsZero(), "ocorridoEm"),
	)
}

func (e *Settled) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

func (e *Rejected) validate() error {
	return firstErr(
		need(e.EventID != uuid.Nil, "eventoId"),
		need(e.TransferID != uuid.Nil, "transferenciaId"),
		need(e.Reason != "", "motivo"),
		need(!e.OccurredAt.IsZero(), "ocorridoEm"),
	)
}

func need(ok bool, field string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("missing required field %q", field)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Kinds of derived event ids (DerivedID), one per event a service emits
// in reaction to a transfer.
const (
	KindAnalysed          = "analisada"
	KindRejectedAntifraud = "rejeitada-antifraude"
	KindSettled           = "liquidada"
	KindRejectedLedger    = "rejeitada-ledger"
	KindReserved          = "reservada"
	KindCancelled         = "cancelada"
)

// ErrUnderivedID marks a result whose eventoId is not one DerivedID gives
// for its transfer and type: a poison message (CheckResultID's errors wrap
// ErrMalformed too), never retried and never recorded for deduplication.
var ErrUnderivedID = errors.New("eventoId is not derived from the transfer id")

// CheckResultID returns nil when eventID is the id derived for transferID
// and the result type typ (TypeSettled: KindSettled; TypeRejected:
// KindRejectedAntifraud or KindRejectedLedger, since antifraud and the
// ledger both reject; TypeReserved: KindReserved; TypeCancelled:
// KindCancelled), otherwise an error wrapping ErrUnderivedID. So an
// event id names one transfer and one kind: a record for one transfer
// cannot take, and so burn in a deduplication log, the id of another
// transfer's result.
func CheckResultID(typ string, eventID, transferID uuid.UUID) error {
	var kinds []string
	switch typ {
	case TypeSettled:
		kinds = []string{KindSettled}
	case TypeRejected:
		kinds = []string{KindRejectedAntifraud, KindRejectedLedger}
	case TypeReserved:
		kinds = []string{KindReserved}
	case TypeCancelled:
		kinds = []string{KindCancelled}
	default:
		return fmt.Errorf("%w: %w: %s is not a result type", ErrMalformed, ErrUnderivedID, typ)
	}
	for _, k := range kinds {
		if DerivedID(k, transferID) == eventID {
			return nil
		}
	}
	return fmt.Errorf("%w: %w: %s %s of transfer %s", ErrMalformed, ErrUnderivedID, typ, eventID, transferID)
}

// DerivedID is the id of an event emitted in reaction to a transfer: the
// same transfer and kind always give the same id (the seed's idDerivado), so
// a redelivered input yields the same output id. Byte for byte it is Java's
// UUID.nameUUIDFromBytes((kind + ":" + transferId).getBytes(UTF_8)): an MD5
// name-based UUID, version 3, with no namespace.
func DerivedID(kind string, transferID uuid.UUID) uuid.UUID {
	sum := md5.Sum([]byte(kind + ":" + transferID.String())) //nolint:gosec // see import.
	sum[6] = sum[6]&0x0f | 0x30
	sum[8] = sum[8]&0x3f | 0x80
	return uuid.UUID(sum)
}
