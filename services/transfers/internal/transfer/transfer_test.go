package transfer_test

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/validate"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

func valid() transfer.Request {
	return transfer.Request{Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "BRL"}
}

func TestValidate(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	in := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }
	hold := func(at string) func(r *transfer.Request) {
		return func(r *transfer.Request) { r.Capture, r.ExpiresAt = events.CaptureManual, at }
	}
	tests := []struct {
		name   string
		change func(r *transfer.Request)
		want   []string // fields in error, in order; nil means valid
	}{
		{"valid", func(*transfer.Request) {}, nil},
		{"AUTOMATICA", func(r *transfer.Request) { r.Capture = events.CaptureAutomatic }, nil},
		{"hold with the default expiry", hold(""), nil},
		{"hold expiring in a minute", hold(in(time.Minute)), nil},
		{"hold expiring in 30 days", hold(in(30 * 24 * time.Hour)), nil},
		{"hold expiring in another zone", hold(now.Add(time.Hour).In(time.FixedZone("BRT", -3*3600)).Format(time.RFC3339)), nil},
		{"hold expiring under a minute", hold(in(time.Minute - time.Nanosecond)), []string{"expiraEm"}},
		{"hold expiring over 30 days", hold(in(30*24*time.Hour + time.Nanosecond)), []string{"expiraEm"}},
		{"hold expired", hold(in(-time.Hour)), []string{"expiraEm"}},
		{"expiraEm not a time", hold("amanhã"), []string{"expiraEm"}},
		{"expiraEm without a zone", hold("2026-12-05T12:00:00"), []string{"expiraEm"}},
		{"expiraEm without MANUAL", func(r *transfer.Request) { r.ExpiresAt = in(time.Hour) }, []string{"expiraEm"}},
		{"expiraEm with AUTOMATICA", func(r *transfer.Request) { r.Capture, r.ExpiresAt = events.CaptureAutomatic, in(time.Hour) }, []string{"expiraEm"}},
		{"unknown captura", func(r *transfer.Request) { r.Capture = "manual" }, []string{"captura"}},
		{"smallest amount", func(r *transfer.Request) { r.AmountCents = 1 }, nil},
		{"largest amount", func(r *transfer.Request) { r.AmountCents = 1_000_000_000_000_000 }, nil},
		{"all allowed characters", func(r *transfer.Request) { r.Source = "aZ09._-" }, nil},
		{"32-character account", func(r *transfer.Request) { r.Source = strings.Repeat("a", 32) }, nil},
		{"zero amount", func(r *transfer.Request) { r.AmountCents = 0 }, []string{"valorEmCentavos"}},
		{"negative amount", func(r *transfer.Request) { r.AmountCents = -1 }, []string{"valorEmCentavos"}},
		{"amount over 10^15", func(r *transfer.Request) { r.AmountCents = 1_000_000_000_000_001 }, []string{"valorEmCentavos"}},
		{"same accounts", func(r *transfer.Request) { r.Destination = r.Source }, []string{"contaDestino"}},
		{"missing source", func(r *transfer.Request) { r.Source = "" }, []string{"contaOrigem"}},
		{"missing destination", func(r *transfer.Request) { r.Destination = "" }, []string{"contaDestino"}},
		{"33-character account", func(r *transfer.Request) { r.Source = strings.Repeat("a", 33) }, []string{"contaOrigem"}},
		{"space in account", func(r *transfer.Request) { r.Destination = "CC 002" }, []string{"contaDestino"}},
		{"non-ASCII account", func(r *transfer.Request) { r.Destination = "CÇ-002" }, []string{"contaDestino"}},
		{"lower-case currency", func(r *transfer.Request) { r.Currency = "brl" }, []string{"moeda"}},
		{"two-letter currency", func(r *transfer.Request) { r.Currency = "BR" }, []string{"moeda"}},
		{"four-letter currency", func(r *transfer.Request) { r.Currency = "BRLL" }, []string{"moeda"}},
		{"missing currency", func(r *transfer.Request) { r.Currency = "" }, []string{"moeda"}},
		{"currency with newline", func(r *transfer.Request) { r.Currency = "BRL\n" }, []string{"moeda"}},
		{"everything wrong", func(r *transfer.Request) { *r = transfer.Request{} },
			[]string{"contaOrigem", "contaDestino", "valorEmCentavos", "moeda"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid()
			tt.change(&r)
			err := r.Validate(now)
			var got []string
			if err != nil {
				ve, ok := err.(*validate.ValidationError)
				if !ok {
					t.Fatalf("Validate() = %T %v, want *ValidationError", err, err)
				}
				for _, f := range ve.Fields {
					if f.Message == "" {
						t.Errorf("field %s has no message", f.Field)
					}
					got = append(got, f.Field)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("invalid fields mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := valid()
	if base.Fingerprint() != valid().Fingerprint() {
		t.Fatal("equal requests have different fingerprints")
	}
	others := map[string]transfer.Request{
		"source":      {Source: "CC-009", Destination: "CC-002", AmountCents: 30000, Currency: "BRL"},
		"destination": {Source: "CC-001", Destination: "CC-009", AmountCents: 30000, Currency: "BRL"},
		"amount":      {Source: "CC-001", Destination: "CC-002", AmountCents: 30001, Currency: "BRL"},
		"currency":    {Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "USD"},
		// Field boundaries matter: "CC-0"+"01CC-002" is not "CC-001"+"CC-002".
		"shifted boundary": {Source: "CC-0", Destination: "01CC-002", AmountCents: 30000, Currency: "BRL"},
		"hold":             {Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "BRL", Capture: events.CaptureManual},
		"hold with expiry": {Source: "CC-001", Destination: "CC-002", AmountCents: 30000, Currency: "BRL", Capture: events.CaptureManual,
			ExpiresAt: "2026-12-05T12:00:00Z"},
	}
	// captura absent and AUTOMATICA are one request; an instant is one
	// expiraEm however it is written.
	auto := valid()
	auto.Capture = events.CaptureAutomatic
	if auto.Fingerprint() != base.Fingerprint() {
		t.Error("captura AUTOMATICA has another fingerprint than no captura")
	}
	utc, brt := others["hold with expiry"], others["hold with expiry"]
	brt.ExpiresAt = "2026-12-05T09:00:00-03:00"
	if utc.Fingerprint() != brt.Fingerprint() {
		t.Error("one expiraEm instant in two zones has two fingerprints")
	}
	seen := map[[32]byte]string{base.Fingerprint(): "base"}
	for name, r := range others {
		fp := r.Fingerprint()
		if prev, ok := seen[fp]; ok {
			t.Errorf("%s has the fingerprint of %s", name, prev)
		}
		seen[fp] = name
	}
}

// TestHoldDefaults: a hold without expiraEm expires DefaultHoldTTL after
// the request; an immediate transfer has no expiry.
func TestHoldDefaults(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	r := valid()
	if c, at := r.Hold(now); c != events.CaptureAutomatic || !at.IsZero() {
		t.Errorf("immediate: %s %v", c, at)
	}
	r.Capture = events.CaptureManual
	if c, at := r.Hold(now); c != events.CaptureManual || !at.Equal(now.Add(transfer.DefaultHoldTTL)) {
		t.Errorf("default hold: %s %v", c, at)
	}
	r.ExpiresAt = "2026-12-05T09:00:00-03:00"
	if _, at := r.Hold(now); !at.Equal(now.Add(24*time.Hour)) || at.Location() != time.UTC {
		t.Errorf("hold until expiraEm: %v", at)
	}
}

// TestFingerprintOfAnImmediateTransferIsStable: the bytes hashed for a
// transfer without captura are those stored before holds existed (each
// string length-prefixed, 8 bytes big-endian, then the amount), so that a
// key bound then still replays.
func TestFingerprintOfAnImmediateTransferIsStable(t *testing.T) {
	var b []byte
	for _, s := range []string{"CC-001", "CC-002", "BRL"} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint64(b, 30000)
	if got, want := valid().Fingerprint(), sha256.Sum256(b); got != want {
		t.Errorf("fingerprint %x, want %x", got, want)
	}
}
