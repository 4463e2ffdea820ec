package webhook_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/services/notifications/webhook"
)

func TestVerify(t *testing.T) {
	secret := []byte("s3cr3t-s3cr3t-s3cr3t")
	body := []byte(`{"eventoId":"6f1c","tipo":"TransferenciaLiquidada"}`)
	signedAt := time.Unix(1_764_453_600, 0)
	valid := webhook.Sign(secret, signedAt, body)
	sig := webhook.Signature(secret, signedAt, body)
	other := webhook.Signature([]byte("another-secret-value"), signedAt, body)

	tests := []struct {
		name      string
		secret    []byte
		header    string
		body      []byte
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{name: "valid", secret: secret, header: valid, body: body, now: signedAt},
		{name: "valid at the edge of the window", secret: secret, header: valid, body: body, now: signedAt.Add(5 * time.Minute)},
		{name: "valid, clock slightly behind", secret: secret, header: valid, body: body, now: signedAt.Add(-time.Minute)},
		{name: "spaces and unknown schemes ignored", secret: secret, body: body, now: signedAt,
			header: fmt.Sprintf("t=%d, v0=abc, v1=%s", signedAt.Unix(), sig)},
		{name: "one of several v1 matches (rotation)", secret: secret, body: body, now: signedAt,
			header: fmt.Sprintf("t=%d,v1=%s,v1=%s", signedAt.Unix(), other, sig)},
		{name: "tampered body", secret: secret, header: valid, body: []byte(`{"eventoId":"6f1d","tipo":"TransferenciaLiquidada"}`),
			now: signedAt, want: webhook.ErrSignatureMismatch},
		{name: "wrong secret", secret: []byte("not-the-shared-secret"), header: valid, body: body, now: signedAt,
			want: webhook.ErrSignatureMismatch},
		{name: "timestamp changed", secret: secret, body: body, now: signedAt,
			header: fmt.Sprintf("t=%d,v1=%s", signedAt.Unix()+1, sig), want: webhook.ErrSignatureMismatch},
		{name: "old timestamp (replay)", secret: secret, header: valid, body: body, now: signedAt.Add(5*time.Minute + time.Second),
			want: webhook.ErrTimestampOutOfTolerance},
		{name: "future timestamp", secret: secret, header: valid, body: body, now: signedAt.Add(-10 * time.Minute),
			want: webhook.ErrTimestampOutOfTolerance},
		{name: "custom tolerance", secret: secret, header: valid, body: body, now: signedAt.Add(31 * time.Second),
			tolerance: 30 * time.Second, want: webhook.ErrTimestampOutOfTolerance},
		{name: "empty header", secret: secret, header: "", body: body, now: signedAt, want: webhook.ErrMalformedHeader},
		{name: "no timestamp", secret: secret, header: "v1=" + sig, body: body, now: signedAt, want: webhook.ErrMalformedHeader},
		{name: "no signature", secret: secret, header: fmt.Sprintf("t=%d", signedAt.Unix()), body: body, now: signedAt,
			want: webhook.ErrMalformedHeader},
		{name: "signature not hex", secret: secret, header: fmt.Sprintf("t=%d,v1=zz", signedAt.Unix()), body: body,
			now: signedAt, want: webhook.ErrMalformedHeader},
		{name: "truncated signature", secret: secret, header: fmt.Sprintf("t=%d,v1=%s", signedAt.Unix(), sig[:20]), body: body,
			now: signedAt, want: webhook.ErrMalformedHeader},
		{name: "repeated timestamp", secret: secret, header: fmt.Sprintf("t=1,t=%d,v1=%s", signedAt.Unix(), sig), body: body,
			now: signedAt, want: webhook.ErrMalformedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.Verify(tt.secret, tt.header, tt.body, tt.now, tt.tolerance)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSignFormat(t *testing.T) {
	h := webhook.Sign([]byte("k"), time.Unix(42, 0), []byte("x"))
	if !strings.HasPrefix(h, "t=42,v1=") || len(h) != len("t=42,v1=")+64 {
		t.Fatalf("Sign() = %q, want t=42,v1=<64 hex>", h)
	}
}

// During a rotation every request carries one v1 entry per secret; a
// receiver holding either secret verifies it, one holding another does not.
func TestSignAllRotation(t *testing.T) {
	oldSecret, newSecret := []byte("old-secret-0123456789"), []byte("new-secret-0123456789")
	body := []byte(`{"eventoId":"6f1c"}`)
	at := time.Unix(1_764_453_600, 0)
	h := webhook.SignAll(at, body, newSecret, oldSecret)
	want := fmt.Sprintf("t=%d,v1=%s,v1=%s", at.Unix(), webhook.Signature(newSecret, at, body), webhook.Signature(oldSecret, at, body))
	if h != want {
		t.Fatalf("SignAll() = %q, want %q", h, want)
	}
	for _, tt := range []struct {
		secret []byte
		want   error
	}{{oldSecret, nil}, {newSecret, nil}, {[]byte("a-third-secret-0123456"), webhook.ErrSignatureMismatch}} {
		if err := webhook.Verify(tt.secret, h, body, at, 0); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("Verify(%s) = %v, want %v", tt.secret, err, tt.want)
		}
	}
}

// A receiver checks the signature over the raw body before decoding it.
func ExampleVerify() {
	secret := []byte("the-shared-webhook-secret")
	body := []byte(`{"eventoId":"3b2d5c0e-8d5f-4f5e-9a44-0c1f2b1c9d11","status":"LIQUIDADA"}`)
	sentAt := time.Now()
	header := webhook.Sign(secret, sentAt, body) // what the service sends

	err := webhook.Verify(secret, header, body, time.Now(), webhook.DefaultTolerance)
	fmt.Println("authentic:", err == nil)

	err = webhook.Verify(secret, header, []byte(`{"status":"REJEITADA"}`), time.Now(), webhook.DefaultTolerance)
	fmt.Println("tampered:", errors.Is(err, webhook.ErrSignatureMismatch))
	// Output:
	// authentic: true
	// tampered: true
}

// VerifyPayload hands back the signed body's event id: a replayed request
// with a fresh X-Paysuite-Event-Id header still deduplicates on the id it
// was signed with, and a body whose id was changed does not verify.
func TestVerifyPayloadReturnsTheSignedEventID(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef")
	at := time.Now()
	body := []byte(`{"eventoId":"3b2d5c0e-8d5f-4f5e-9a44-0c1f2b1c9d11","tipo":"TransferenciaLiquidada","status":"LIQUIDADA"}`)
	header := webhook.Sign(secret, at, body)
	p, err := webhook.VerifyPayload(secret, header, body, at, 0)
	if err != nil || p.EventID != "3b2d5c0e-8d5f-4f5e-9a44-0c1f2b1c9d11" || p.Status != webhook.StatusSettled {
		t.Fatalf("VerifyPayload = %+v, %v", p, err)
	}
	forged := []byte(strings.Replace(string(body), "3b2d5c0e", "ffffffff", 1))
	if _, err := webhook.VerifyPayload(secret, header, forged, at, 0); !errors.Is(err, webhook.ErrSignatureMismatch) {
		t.Errorf("a body with another event id: %v, want ErrSignatureMismatch", err)
	}
	for _, b := range [][]byte{[]byte(`{"status":"LIQUIDADA"}`), []byte(`not json`)} {
		if _, err := webhook.VerifyPayload(secret, webhook.Sign(secret, at, b), b, at, 0); !errors.Is(err, webhook.ErrPayload) {
			t.Errorf("authentic body %s: %v, want ErrPayload", b, err)
		}
	}
}

// A receiver deduplicates on the event id of the verified body.
func ExampleVerifyPayload() {
	secret := []byte("the-shared-webhook-secret")
	body := []byte(`{"eventoId":"3b2d5c0e-8d5f-4f5e-9a44-0c1f2b1c9d11","status":"LIQUIDADA"}`)
	header := webhook.Sign(secret, time.Now(), body) // what the service sends

	p, err := webhook.VerifyPayload(secret, header, body, time.Now(), webhook.DefaultTolerance)
	fmt.Println(err == nil, "deduplicate on", p.EventID)
	// Output:
	// true deduplicate on 3b2d5c0e-8d5f-4f5e-9a44-0c1f2b1c9d11
}
