// Package transfersig is the proof of who asked for a transfer: the
// transfers service signs, with an Ed25519 key of its own, the transfer
// id, the source and destination accounts, the amount, the currency, the
// client (the token's sub) and, for a hold, its capture mode and expiry, of
// every transfer it accepts (a Claim), and likewise what the requester of
// every refund it accepts asked for (a RefundClaim); antifraud
// passes the signature through unchanged; the ledger verifies it against
// the public keys it is configured with before it applies any other rule,
// and debits nothing without a valid one.
//
// The private key is given only to the transfers service's process: no
// Kafka principal and no database role holds it. So neither the broker
// credentials nor write access to an outbox table can make a record that
// moves money; a record changed in flight (another amount, account or
// client) no longer verifies.
//
// Ed25519 (RFC 8032, crypto/ed25519 of the standard library) because it is
// small (32-byte keys, 64-byte signatures: some 90 characters a record),
// fast (a verification costs some 50 us, one per settlement),
// deterministic (no per-signature randomness whose failure leaks the key,
// as ECDSA's does) and has no parameters to get wrong. Keys are kept as
// JWKs, the format of the suite's token keys, with a kid so that the
// ledger can accept two keys during a rotation.
package transfersig

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
)

// Claim is what a signature covers: who asked to move what, from where to
// where.
type Claim struct {
	TransferID  uuid.UUID
	Source      string
	Destination string
	AmountCents int64
	Currency    string
	// Client is the client that asked (clienteId).
	Client string
	// Hold is captura MANUAL: the ledger reserves the amount until
	// ExpiresAt (expiraEm; zero when the record names none) instead of
	// posting it.
	Hold      bool
	ExpiresAt time.Time
}

// The purposes that start every signed message, so that a signature made
// for one purpose is never valid for another (and the version can
// change): purpose for an immediate transfer (no hold, no expiry), whose
// message has been the same since holds existed, so that records signed
// before them still verify; purposeHold for a claim with a hold or an
// expiry, whose message adds both. A hold's signature therefore never
// verifies as an immediate transfer's, nor the reverse.
const (
	purpose     = "paysuite transfer authorization v1\x00"
	purposeHold = "paysuite transfer authorization v2\x00"
)

// Message is the byte string that is signed: the purpose, the transfer
// id's 16 bytes, then each field in a fixed order, strings length-prefixed
// and the amount as 8 big-endian bytes, then, under purposeHold, one byte
// for Hold and the expiry as an RFC 3339 string in UTC with its
// nanoseconds (empty when zero), so that two different claims never have
// the same message.
func (c Claim) Message() []byte {
	hold := c.Hold || !c.ExpiresAt.IsZero()
	p := purpose
	if hold {
		p = purposeHold
	}
	b := make([]byte, 0, len(p)+16+8*6+1+len(c.Source)+len(c.Destination)+len(c.Currency)+len(c.Client)+len(time.RFC3339Nano))
	b = append(b, p...)
	b = append(b, c.TransferID[:]...)
	str := func(s string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(c.Source)
	str(c.Destination)
	b = binary.BigEndian.AppendUint64(b, uint64(c.AmountCents)) //nolint:gosec // a bit pattern, not arithmetic
	str(c.Currency)
	str(c.Client)
	if hold {
		flag := byte(0)
		if c.Hold {
			flag = 1
		}
		b = append(b, flag)
		expires := ""
		if !c.ExpiresAt.IsZero() {
			expires = c.ExpiresAt.UTC().Format(time.RFC3339Nano)
		}
		str(expires)
	}
	return b
}

// RefundClaim is what a refund's signature covers: who asked to return
// what part of which transfer, and whether that requester is an operator
// (who may refund any transfer) rather than the destination's titular.
type RefundClaim struct {
	RefundID    uuid.UUID
	TransferID  uuid.UUID
	Source      string
	Destination string
	AmountCents int64
	Currency    string
	// Client is the client that asked for the refund (clienteId).
	Client string
	// Operator is true when Client asked as an operator (operador).
	Operator bool
}

// purposeRefund starts every signed refund message: no transfer's
// signature verifies as a refund's, nor the reverse.
const purposeRefund = "paysuite refund authorization v1\x00"

// Message is the byte string that is signed: purposeRefund, the refund
// id's and the transfer id's 16 bytes each, then the fields in a fixed
// order as in Claim.Message (strings length-prefixed, the amount as 8
// big-endian bytes), then one byte for Operator.
func (c RefundClaim) Message() []byte {
	b := make([]byte, 0, len(purposeRefund)+32+8*5+1+len(c.Source)+len(c.Destination)+len(c.Currency)+len(c.Client))
	b = append(b, purposeRefund...)
	b = append(b, c.RefundID[:]...)
	b = append(b, c.TransferID[:]...)
	str := func(s string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(c.Source)
	str(c.Destination)
	b = binary.BigEndian.AppendUint64(b, uint64(c.AmountCents)) //nolint:gosec // a bit pattern, not arithmetic
	str(c.Currency)
	str(c.Client)
	flag := byte(0)
	if c.Operator {
		flag = 1
	}
	return append(b, flag)
}

// Signer signs claims with one private key.
type Signer struct {
	keyID string
	key   ed25519.PrivateKey
}

// NewSigner returns a signer with key, named keyID.
func NewSigner(keyID string, key ed25519.PrivateKey) (Signer, error) {
	if keyID == "" {
		return Signer{}, errors.New("transfer authorization key: no kid")
	}
	if len(key) != ed25519.PrivateKeySize {
		return Signer{}, errors.New("transfer authorization key: not an Ed25519 private key")
	}
	return Signer{keyID: keyID, key: key}, nil
}

// KeyID is the kid of the signer's key.
func (s Signer) KeyID() string { return s.keyID }

// Public is the signer's public key.
func (s Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign returns the authorization of c.
func (s Signer) Sign(c Claim) *events.Authorization { return s.sign(c.Message()) }

// SignRefund returns the authorization of the refund c.
func (s Signer) SignRefund(c RefundClaim) *events.Authorization { return s.sign(c.Message()) }

func (s Signer) sign(msg []byte) *events.Authorization {
	sig := ed25519.Sign(s.key, msg)
	return &events.Authorization{KeyID: s.keyID, Signature: base64.RawURLEncoding.EncodeToString(sig)}
}

// Errors of Verify.
var (
	// ErrUnsigned: the record carries no authorization.
	ErrUnsigned = errors.New("no authorization")
	// ErrUnknownKey: the authorization names a key the verifier does not
	// hold.
	ErrUnknownKey = errors.New("authorization signed by an unknown key")
	// ErrBadSignature: the signature is malformed or does not match the
	// claim.
	ErrBadSignature = errors.New("authorization signature does not verify")
)

// Verifier verifies authorizations against a set of public keys, selected
// by kid: one key, or two during a rotation.
type Verifier struct {
	keys map[string]ed25519.PublicKey
}

// NewVerifier returns a verifier holding keys, by kid. It needs at least
// one key.
func NewVerifier(keys map[string]ed25519.PublicKey) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("transfer authorization keys: none")
	}
	v := &Verifier{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for kid, k := range keys {
		if kid == "" || len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("transfer authorization key %q: not an Ed25519 public key with a kid", kid)
		}
		v.keys[kid] = k
	}
	return v, nil
}

// KeyIDs returns the kids the verifier accepts, sorted, for logs; none
// for a nil verifier.
func (v *Verifier) KeyIDs() []string {
	if v == nil {
		return nil
	}
	out := make([]string, 0, len(v.keys))
	for kid := range v.keys {
		out = append(out, kid)
	}
	slices.Sort(out)
	return out
}

// Verify returns nil when a is a valid signature of c by one of the
// verifier's keys: ErrUnsigned without a, ErrUnknownKey for another kid,
// ErrBadSignature otherwise. A nil verifier verifies nothing
// (ErrUnknownKey).
func (v *Verifier) Verify(c Claim, a *events.Authorization) error { return v.verify(c.Message(), a) }

// VerifyRefund is Verify for the refund c.
func (v *Verifier) VerifyRefund(c RefundClaim, a *events.Authorization) error {
	return v.verify(c.Message(), a)
}

func (v *Verifier) verify(msg []byte, a *events.Authorization) error {
	if a == nil || (a.KeyID == "" && a.Signature == "") {
		return ErrUnsigned
	}
	var key ed25519.PublicKey
	if v != nil {
		key = v.keys[a.KeyID]
	}
	if key == nil {
		return ErrUnknownKey
	}
	sig, err := base64.RawURLEncoding.DecodeString(a.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(key, msg, sig) {
		return ErrBadSignature
	}
	return nil
}
