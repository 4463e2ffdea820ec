package transfersig_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
)

func newKey(tb testing.TB) transfersig.Signer {
	tb.Helper()
	s, err := transfersig.NewKey()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func verifier(tb testing.TB, signers ...transfersig.Signer) *transfersig.Verifier {
	tb.Helper()
	keys := map[string]ed25519.PublicKey{}
	for _, s := range signers {
		keys[s.KeyID()] = s.Public()
	}
	v, err := transfersig.NewVerifier(keys)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

var claim = transfersig.Claim{TransferID: uuid.MustParse("0b8f3c1e-6d0a-4f5e-9a7b-2c4d6e8f0a1b"), Source: "CC-001",
	Destination: "CC-002", AmountCents: 30_000, Currency: "BRL", Client: "ana"}

// Every field is covered: a claim changed in any one of them does not
// verify, and nor does a signature by another key, a key the verifier
// does not hold, a mangled signature or none.
func TestVerify(t *testing.T) {
	t.Parallel()
	good, other := newKey(t), newKey(t)
	v := verifier(t, good)
	a := good.Sign(claim)
	if err := v.Verify(claim, a); err != nil {
		t.Fatalf("the signed claim: %v", err)
	}
	changed := func(f func(c *transfersig.Claim)) transfersig.Claim { c := claim; f(&c); return c }
	flip := func(s string) string {
		b, _ := base64.RawURLEncoding.DecodeString(s)
		b[10] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	tests := []struct {
		name  string
		claim transfersig.Claim
		auth  *events.Authorization
		want  error
	}{
		{"another transfer", changed(func(c *transfersig.Claim) { c.TransferID = uuid.New() }), a, transfersig.ErrBadSignature},
		{"another source", changed(func(c *transfersig.Claim) { c.Source = "CC-009" }), a, transfersig.ErrBadSignature},
		{"another destination", changed(func(c *transfersig.Claim) { c.Destination = "CC-009" }), a, transfersig.ErrBadSignature},
		{"another amount", changed(func(c *transfersig.Claim) { c.AmountCents++ }), a, transfersig.ErrBadSignature},
		{"another currency", changed(func(c *transfersig.Claim) { c.Currency = "USD" }), a, transfersig.ErrBadSignature},
		{"another client", changed(func(c *transfersig.Claim) { c.Client = "bruno" }), a, transfersig.ErrBadSignature},
		{"no client", changed(func(c *transfersig.Claim) { c.Client = "" }), a, transfersig.ErrBadSignature},
		// Length prefixes: moving a character from one field to the next
		// changes the message.
		{"shifted boundary", changed(func(c *transfersig.Claim) { c.Source, c.Destination = "CC-00", "1CC-002" }), a, transfersig.ErrBadSignature},
		{"signed by another key under the good kid", claim,
			&events.Authorization{KeyID: good.KeyID(), Signature: other.Sign(claim).Signature}, transfersig.ErrBadSignature},
		{"signed by a key the verifier does not hold", claim, other.Sign(claim), transfersig.ErrUnknownKey},
		{"flipped bit", claim, &events.Authorization{KeyID: a.KeyID, Signature: flip(a.Signature)}, transfersig.ErrBadSignature},
		{"truncated", claim, &events.Authorization{KeyID: a.KeyID, Signature: a.Signature[:20]}, transfersig.ErrBadSignature},
		{"not base64", claim, &events.Authorization{KeyID: a.KeyID, Signature: "!!" + a.Signature[2:]}, transfersig.ErrBadSignature},
		{"no signature", claim, &events.Authorization{KeyID: a.KeyID}, transfersig.ErrBadSignature},
		{"empty", claim, &events.Authorization{}, transfersig.ErrUnsigned},
		{"none", claim, nil, transfersig.ErrUnsigned},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := v.Verify(tc.claim, tc.auth); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	var none *transfersig.Verifier
	if err := none.Verify(claim, a); !errors.Is(err, transfersig.ErrUnknownKey) {
		t.Errorf("a nil verifier: %v, want ErrUnknownKey", err)
	}
}

// A hold's signature covers its capture mode and its expiry: flipping
// captura either way, or moving expiraEm by any amount, fails; the same
// instant written in another zone is the same claim; and an immediate
// transfer's message is the one it was before holds existed.
func TestVerifyHold(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	v := verifier(t, key)
	expires := time.Date(2026, 12, 11, 22, 0, 0, 123456000, time.UTC)
	hold := claim
	hold.Hold, hold.ExpiresAt = true, expires
	changed := func(c transfersig.Claim, f func(c *transfersig.Claim)) transfersig.Claim { f(&c); return c }
	tests := []struct {
		name          string
		signed, check transfersig.Claim
		want          error
	}{
		{"the hold as signed", hold, hold, nil},
		{"the same expiry in another zone", hold,
			changed(hold, func(c *transfersig.Claim) { c.ExpiresAt = expires.In(time.FixedZone("BRT", -3*3600)) }), nil},
		{"a hold's signature on the immediate transfer", hold,
			changed(hold, func(c *transfersig.Claim) { c.Hold, c.ExpiresAt = false, time.Time{} }), transfersig.ErrBadSignature},
		{"captura flipped to AUTOMATICA, expiry kept", hold,
			changed(hold, func(c *transfersig.Claim) { c.Hold = false }), transfersig.ErrBadSignature},
		{"an immediate transfer's signature on a hold", claim,
			changed(claim, func(c *transfersig.Claim) { c.Hold = true }), transfersig.ErrBadSignature},
		{"expiry a microsecond later", hold,
			changed(hold, func(c *transfersig.Claim) { c.ExpiresAt = expires.Add(time.Microsecond) }), transfersig.ErrBadSignature},
		{"expiry a month later", hold,
			changed(hold, func(c *transfersig.Claim) { c.ExpiresAt = expires.AddDate(0, 1, 0) }), transfersig.ErrBadSignature},
		{"expiry dropped", hold,
			changed(hold, func(c *transfersig.Claim) { c.ExpiresAt = time.Time{} }), transfersig.ErrBadSignature},
		{"a hold without expiry given one", changed(hold, func(c *transfersig.Claim) { c.ExpiresAt = time.Time{} }),
			hold, transfersig.ErrBadSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := v.Verify(tc.check, key.Sign(tc.signed)); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	// The immediate transfer's message: purpose v1, then the fields, and
	// nothing after the client.
	msg := claim.Message()
	if want := "paysuite transfer authorization v1\x00"; !strings.HasPrefix(string(msg), want) || !strings.HasSuffix(string(msg), "\x00\x00\x00\x00\x00\x00\x00\x03ana") {
		t.Errorf("the immediate transfer's message changed: %q", msg)
	}
}

// During a rotation the ledger holds the old and the new public key and
// accepts a signature by either, chosen by kid; once the old key is
// dropped its signatures are refused.
func TestRotation(t *testing.T) {
	t.Parallel()
	old, next := newKey(t), newKey(t)
	both := verifier(t, old, next)
	for _, s := range []transfersig.Signer{old, next} {
		if err := both.Verify(claim, s.Sign(claim)); err != nil {
			t.Errorf("key %s during the rotation: %v", s.KeyID(), err)
		}
	}
	after := verifier(t, next)
	if err := after.Verify(claim, old.Sign(claim)); !errors.Is(err, transfersig.ErrUnknownKey) {
		t.Errorf("the old key after the rotation: %v, want ErrUnknownKey", err)
	}
	if err := after.Verify(claim, next.Sign(claim)); err != nil {
		t.Errorf("the new key after the rotation: %v", err)
	}
}

// Signatures are deterministic (Ed25519): the same claim gives the same
// bytes, so a redelivered request makes the same record.
func TestSignIsDeterministic(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	if a, b := k.Sign(claim), k.Sign(claim); *a != *b {
		t.Errorf("two signatures of one claim differ: %+v, %+v", a, b)
	}
}

// The key files: the private key is readable by its owner only, the
// public set verifies what the private key signs, two sets merged make a
// rotation's verifier, and a private key offered to the verifier, a set
// with a kid twice or an empty set are refused.
func TestKeyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyDir, pubDir := filepath.Join(dir, "private"), filepath.Join(dir, "public")
	kid, err := transfersig.GenerateKey(keyDir, pubDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transfersig.GenerateKey(keyDir, pubDir); err == nil {
		t.Error("GenerateKey overwrote an existing key")
	}
	if created, err := transfersig.EnsureKey(keyDir, pubDir); err != nil || created {
		t.Errorf("EnsureKey on an existing key = %v, %v; want false, nil", created, err)
	}
	keyPath, pubPath := filepath.Join(keyDir, transfersig.KeyFile), filepath.Join(pubDir, transfersig.JWKSFile)
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private key file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	s, err := transfersig.ReadSigner(keyPath)
	if err != nil || s.KeyID() != kid {
		t.Fatalf("ReadSigner = %q, %v; want kid %q", s.KeyID(), err, kid)
	}
	v, err := transfersig.ReadVerifier(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(claim, s.Sign(claim)); err != nil {
		t.Errorf("the public set does not verify the private key's signature: %v", err)
	}
	pub, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(pub), `"d"`) {
		t.Errorf("the public set holds private material:\n%s", pub)
	}

	// A rotation: the second key's set merged with the first.
	dir2 := t.TempDir()
	if _, err := transfersig.GenerateKey(dir2, dir2); err != nil {
		t.Fatal(err)
	}
	s2, err := transfersig.ReadSigner(filepath.Join(dir2, transfersig.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pub2, err := os.ReadFile(filepath.Join(dir2, transfersig.JWKSFile))
	if err != nil {
		t.Fatal(err)
	}
	merged := filepath.Join(dir, "merged.json")
	write(t, merged, `{"keys": [`+firstKey(t, pub)+`, `+firstKey(t, pub2)+`]}`)
	both, err := transfersig.ReadVerifier(merged)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []transfersig.Signer{s, s2} {
		if err := both.Verify(claim, k.Sign(claim)); err != nil {
			t.Errorf("merged set, key %s: %v", k.KeyID(), err)
		}
	}

	priv, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"private key": `{"keys": [` + string(priv) + `]}`,
		"kid twice":   `{"keys": [` + firstKey(t, pub) + `, ` + firstKey(t, pub) + `]}`,
		"empty":       `{"keys": []}`,
		"not json":    `keys`,
	}
	for name, content := range bad {
		p := filepath.Join(dir, "bad.json")
		write(t, p, content)
		if _, err := transfersig.ReadVerifier(p); err == nil {
			t.Errorf("ReadVerifier accepted a set with %s", name)
		}
	}
	if _, err := transfersig.ReadSigner(pubPath); err == nil {
		t.Error("ReadSigner accepted a public key set")
	}
}

func write(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil { //nolint:gosec // a path under the test's TempDir
		tb.Fatal(err)
	}
}

// firstKey is the JSON of the first key of a JWKS file's content.
func firstKey(tb testing.TB, set []byte) string {
	tb.Helper()
	s := string(set)
	start, end := strings.Index(s, "["), strings.LastIndex(s, "]")
	if start < 0 || end < start {
		tb.Fatalf("not a JWKS: %s", s)
	}
	return s[start+1 : end]
}

// BenchmarkVerify is the ledger's cost per settlement.
func BenchmarkVerify(b *testing.B) {
	k := newKey(b)
	v := verifier(b, k)
	a := k.Sign(claim)
	for b.Loop() {
		if err := v.Verify(claim, a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSign is the transfers service's cost per accepted transfer.
func BenchmarkSign(b *testing.B) {
	k := newKey(b)
	for b.Loop() {
		k.Sign(claim)
	}
}

var refund = transfersig.RefundClaim{RefundID: uuid.MustParse("5d1c7a2e-8b3f-4c6d-9e0a-1b2c3d4e5f60"), TransferID: claim.TransferID,
	Source: "CC-001", Destination: "CC-002", AmountCents: 10_000, Currency: "BRL", Client: "bruno"}

// A refund's signature covers every field of the refund claim, the
// operator flag included, and never verifies as a transfer's claim, nor
// a transfer's as a refund's, even when the fields they share are equal.
func TestVerifyRefund(t *testing.T) {
	t.Parallel()
	key, other := newKey(t), newKey(t)
	v := verifier(t, key)
	a := key.SignRefund(refund)
	if err := v.VerifyRefund(refund, a); err != nil {
		t.Fatalf("the signed refund: %v", err)
	}
	changed := func(f func(c *transfersig.RefundClaim)) transfersig.RefundClaim { c := refund; f(&c); return c }
	tests := []struct {
		name  string
		claim transfersig.RefundClaim
		auth  *events.Authorization
		want  error
	}{
		{"another refund", changed(func(c *transfersig.RefundClaim) { c.RefundID = uuid.New() }), a, transfersig.ErrBadSignature},
		{"another transfer", changed(func(c *transfersig.RefundClaim) { c.TransferID = uuid.New() }), a, transfersig.ErrBadSignature},
		{"ids swapped", changed(func(c *transfersig.RefundClaim) { c.RefundID, c.TransferID = c.TransferID, c.RefundID }), a, transfersig.ErrBadSignature},
		{"another source", changed(func(c *transfersig.RefundClaim) { c.Source = "CC-009" }), a, transfersig.ErrBadSignature},
		{"another destination", changed(func(c *transfersig.RefundClaim) { c.Destination = "CC-009" }), a, transfersig.ErrBadSignature},
		{"another amount", changed(func(c *transfersig.RefundClaim) { c.AmountCents++ }), a, transfersig.ErrBadSignature},
		{"another currency", changed(func(c *transfersig.RefundClaim) { c.Currency = "USD" }), a, transfersig.ErrBadSignature},
		{"another client", changed(func(c *transfersig.RefundClaim) { c.Client = "ana" }), a, transfersig.ErrBadSignature},
		{"no client", changed(func(c *transfersig.RefundClaim) { c.Client = "" }), a, transfersig.ErrBadSignature},
		{"made an operator", changed(func(c *transfersig.RefundClaim) { c.Operator = true }), a, transfersig.ErrBadSignature},
		{"shifted boundary", changed(func(c *transfersig.RefundClaim) { c.Source, c.Destination = "CC-00", "1CC-002" }), a, transfersig.ErrBadSignature},
		{"an operator's signature made a titular's", refund, key.SignRefund(changed(func(c *transfersig.RefundClaim) { c.Operator = true })), transfersig.ErrBadSignature},
		{"signed by a key the verifier does not hold", refund, other.SignRefund(refund), transfersig.ErrUnknownKey},
		{"none", refund, nil, transfersig.ErrUnsigned},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := v.VerifyRefund(tc.claim, tc.auth); !errors.Is(err, tc.want) {
				t.Errorf("VerifyRefund = %v, want %v", err, tc.want)
			}
		})
	}

	// One kind never verifies as the other: the transfer claim with the
	// refund's own fields, and the refund claim of a transfer's fields.
	asTransfer := transfersig.Claim{TransferID: refund.TransferID, Source: refund.Source, Destination: refund.Destination,
		AmountCents: refund.AmountCents, Currency: refund.Currency, Client: refund.Client}
	if err := v.Verify(asTransfer, a); !errors.Is(err, transfersig.ErrBadSignature) {
		t.Errorf("a refund's signature verified as a transfer's: %v", err)
	}
	asRefund := transfersig.RefundClaim{TransferID: claim.TransferID, Source: claim.Source, Destination: claim.Destination,
		AmountCents: claim.AmountCents, Currency: claim.Currency, Client: claim.Client}
	if err := v.VerifyRefund(asRefund, key.Sign(claim)); !errors.Is(err, transfersig.ErrBadSignature) {
		t.Errorf("a transfer's signature verified as a refund's: %v", err)
	}
	hold := claim
	hold.Hold = true
	if err := v.VerifyRefund(asRefund, key.Sign(hold)); !errors.Is(err, transfersig.ErrBadSignature) {
		t.Errorf("a hold's signature verified as a refund's: %v", err)
	}
	if msg := refund.Message(); !strings.HasPrefix(string(msg), "paysuite refund authorization v1\x00") {
		t.Errorf("the refund's message does not start with its purpose: %q", msg)
	}
	if k := key.SignRefund(refund); *k != *a {
		t.Errorf("two signatures of one refund differ: %+v, %+v", k, a)
	}
}
