// Package webhook is the wire format of the notifications service's signed
// webhooks: the JSON body, the headers, and the HMAC-SHA256 signature. The
// service signs with Sign; receivers check a request with VerifyPayload (or
// Verify) before they trust it, and deduplicate on the event id of the body
// that VerifyPayload returns (a send whose outcome was unknown is sent again,
// so one event can arrive twice). The X-Paysuite-Event-Id header is outside
// the signature: whoever replays a signed request within the tolerance can
// change it, so it is for logs and routing only, never for deduplication.
//
// The signature header reads
//
//	X-Paysuite-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// Each destination has its own secret; while a destination's secret is
// being rotated the header carries one v1 entry per secret (new and old),
// and Verify accepts the request when any entry matches the receiver's
// secret.
//
// Signing the timestamp with the body lets a receiver reject a replayed
// request: Verify refuses a timestamp outside its tolerance window.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names of a webhook request.
const (
	// HeaderSignature carries "t=<unix>,v1=<hex>".
	HeaderSignature = "X-Paysuite-Signature"
	// HeaderEventID carries the event id (eventoId) for logs and
	// routing. It is not signed: deduplicate on Payload.EventID from
	// VerifyPayload, which is.
	HeaderEventID = "X-Paysuite-Event-Id"
)

// DefaultTolerance is the replay window receivers should use unless they
// have a reason not to: five minutes, as Stripe's.
const DefaultTolerance = 5 * time.Minute

// Transfer statuses carried in Payload.Status.
const (
	StatusSettled  = "LIQUIDADA"
	StatusRejected = "REJEITADA"
	// The statuses of a hold (CONTRACTS.md section 9): reserved, then
	// settled (a capture), cancelled by the client, or expired.
	StatusReserved  = "RESERVADA"
	StatusCancelled = "CANCELADA"
	StatusExpired   = "EXPIRADA"
	// The statuses of a refund (CONTRACTS.md section 10): the ledger
	// posted it, or refused it for its motivo.
	StatusRefundSettled  = "LIQUIDADO"
	StatusRefundRejected = "REJEITADO"
)

// Payload is the JSON body of a webhook: the result of a transfer.
type Payload struct {
	// EventID is the result event's id (eventoId): the deduplication key,
	// covered by the signature.
	EventID string `json:"eventoId"`
	// Type is the event type: TransferenciaLiquidada,
	// TransferenciaRejeitada, TransferenciaReservada,
	// TransferenciaCancelada, EstornoLiquidado or EstornoRejeitado.
	Type string `json:"tipo"`
	// TransferID is the transfer's id (transferenciaId): for a refund's
	// result, the transfer refunded.
	TransferID string `json:"transferenciaId"`
	// RefundID (estornoId) is the refund's id; only on a refund's result.
	RefundID string `json:"estornoId,omitempty"`
	// Status is the transfer's LIQUIDADA, REJEITADA, RESERVADA, CANCELADA
	// or EXPIRADA, or a refund's LIQUIDADO or REJEITADO.
	Status string `json:"status"`
	// Reason (motivo) says why a transfer or a refund was rejected or a
	// hold released (CANCELADA_PELO_CLIENTE, EXPIRADA); empty otherwise.
	Reason string `json:"motivo,omitempty"`
	// AmountCents (valorEmCentavos) is the amount reserved by a hold,
	// captured from one, or refunded by a settled refund; absent for an
	// immediate transfer's result.
	AmountCents int64 `json:"valorEmCentavos,omitempty"`
	// ExpiresAt (expiraEm) is when a reservation is released unless
	// captured or cancelled first; only on RESERVADA.
	ExpiresAt time.Time `json:"expiraEm,omitzero"`
	// OccurredAt is when the result happened (ocorridoEm), RFC 3339 UTC.
	OccurredAt time.Time `json:"ocorridoEm"`
}

// Errors returned by Verify.
var (
	// ErrMalformedHeader: the signature header is missing or unreadable.
	ErrMalformedHeader = errors.New("webhook: malformed signature header")
	// ErrTimestampOutOfTolerance: the signed timestamp is outside the
	// tolerance window (an old request replayed, or a skewed clock).
	ErrTimestampOutOfTolerance = errors.New("webhook: timestamp outside the tolerance window")
	// ErrSignatureMismatch: no signature matches the body and the secret.
	ErrSignatureMismatch = errors.New("webhook: signature mismatch")
	// ErrPayload: the body is authentic but not a Payload with an event
	// id (VerifyPayload).
	ErrPayload = errors.New("webhook: body is not a payload with an eventoId")
)

// Signature returns the hex HMAC-SHA256 of "<unix seconds>.<body>" with
// secret.
func Signature(secret []byte, t time.Time, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(t.Unix(), 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// Sign returns the value of the X-Paysuite-Signature header for body sent
// at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	return SignAll(t, body, secret)
}

// SignAll returns the X-Paysuite-Signature value with one v1 entry per
// secret, in the order given: "t=<unix>,v1=<hex>,v1=<hex>". During a
// rotation a destination has two secrets, and a receiver holding either
// one verifies the request, so it can switch keys without a gap.
func SignAll(t time.Time, body []byte, secrets ...[]byte) string {
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(t.Unix(), 10))
	for _, secret := range secrets {
		b.WriteString(",v1=")
		b.WriteString(Signature(secret, t, body))
	}
	return b.String()
}

// Verify checks a webhook request: header is the X-Paysuite-Signature
// value, body the raw request body (before any JSON decoding), now the
// receiver's clock, and tolerance how far the signed timestamp may be from
// now either way (DefaultTolerance when <= 0). Several v1 entries are
// accepted, any one matching (for secret rotation).
//
// It returns ErrMalformedHeader, ErrTimestampOutOfTolerance or
// ErrSignatureMismatch (wrapped), or nil when the request is authentic and
// fresh.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var (
		ts     int64
		haveTS bool
		sigs   [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: %q is not key=value", ErrMalformedHeader, part)
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || haveTS {
				return fmt.Errorf("%w: bad or repeated timestamp", ErrMalformedHeader)
			}
			ts, haveTS = n, true
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return fmt.Errorf("%w: v1 is not a hex SHA-256 MAC", ErrMalformedHeader)
			}
			sigs = append(sigs, sig)
		default:
			// Unknown schemes are ignored, so that a future v2 can be sent
			// beside v1.
		}
	}
	if !haveTS || len(sigs) == 0 {
		return fmt.Errorf("%w: t and v1 are required", ErrMalformedHeader)
	}
	signedAt := time.Unix(ts, 0)
	if d := now.Sub(signedAt).Abs(); d > tolerance {
		return fmt.Errorf("%w: signed at %s, %s away from now", ErrTimestampOutOfTolerance,
			signedAt.UTC().Format(time.RFC3339), d.Round(time.Second))
	}
	want, _ := hex.DecodeString(Signature(secret, signedAt, body))
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}

// VerifyPayload is Verify, then the decoding of the authentic body: the
// Payload it returns, its EventID among it, is covered by the signature,
// so it is what a receiver deduplicates on (never the X-Paysuite-Event-Id
// header). It returns Verify's errors, or ErrPayload (wrapped) for an
// authentic body without an eventoId.
func VerifyPayload(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) (Payload, error) {
	if err := Verify(secret, header, body, now, tolerance); err != nil {
		return Payload{}, err
	}
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		return Payload{}, fmt.Errorf("%w: %v", ErrPayload, err)
	}
	if p.EventID == "" {
		return Payload{}, ErrPayload
	}
	return p, nil
}
