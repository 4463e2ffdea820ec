//go:build chaos

package chaos

import (
	"math"
	"testing"
	"time"

	"github.com/paysuite/payments/test/chaos/history"
)

// TestHoldMix checks the load's hold requests without infrastructure: each
// is a hold, the fates come in fateShares' proportions, a hold left to
// expire names expiraEm flagHoldExpiry ahead, and the others name none (the
// default, 7 days) or 30 minutes.
func TestHoldMix(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	const n = 20000
	count := map[holdFate]int{}
	for range n {
		r, p := asHold(transferReq{From: "A", To: "B", AmountCents: 10, Currency: "BRL"}, now, true)
		count[p.fate]++
		if !r.Hold() {
			t.Fatalf("%+v is not a hold", r)
		}
		switch {
		case p.fate == fateExpire:
			at, err := time.Parse(time.RFC3339, r.ExpiresAt)
			if err != nil || !at.Equal(now.Add(*flagHoldExpiry)) || !p.expires.Equal(at) {
				t.Fatalf("left to expire: expiraEm %q (%v), plan %s, want %s", r.ExpiresAt, err, p.expires, now.Add(*flagHoldExpiry))
			}
		case r.ExpiresAt != "" && r.ExpiresAt != now.Add(30*time.Minute).Format(time.RFC3339):
			t.Fatalf("fate %d: expiraEm %q, want none or 30 minutes ahead", p.fate, r.ExpiresAt)
		case !p.expires.IsZero():
			t.Fatalf("fate %d plans an expiry", p.fate)
		}
	}
	for f, share := range fateShares {
		if got := 100 * float64(count[holdFate(f)]) / n; math.Abs(got-float64(share)) > 2 {
			t.Errorf("fate %d: %.1f%% of the holds, want %d%%", f, got, share)
		}
	}
	if r, _ := asHold(transferReq{}, now, true); r.Capture != history.CaptureManual {
		t.Errorf("captura %q, want %s", r.Capture, history.CaptureManual)
	}
	// Past -chaos.hold-expire-for: no hold left to expire, the other
	// fates in their shares of what remains.
	clear(count)
	for range n {
		r, p := asHold(transferReq{From: "A", To: "B", AmountCents: 10, Currency: "BRL"}, now, false)
		count[p.fate]++
		if !p.expires.IsZero() || r.ExpiresAt == now.Add(*flagHoldExpiry).Format(time.RFC3339) {
			t.Fatalf("fate %d without expiry: plan %s, expiraEm %q", p.fate, p.expires, r.ExpiresAt)
		}
	}
	rest := 100 - fateShares[fateExpire]
	for f, share := range fateShares[:fateExpire] {
		if got, want := 100*float64(count[holdFate(f)])/n, 100*float64(share)/float64(rest); math.Abs(got-want) > 2 {
			t.Errorf("without expiry, fate %d: %.1f%% of the holds, want %.1f%%", f, got, want)
		}
	}
	if count[fateExpire] != 0 {
		t.Errorf("without expiry: %d holds left to expire", count[fateExpire])
	}
}

// TestRefundMix checks the load's refunds without infrastructure: the
// fates come in refundShares' proportions, a refund in part asks less
// than the transfer, racing refunds ask together more than it, and the
// second refund of refundBeyond more than the first leaves.
func TestRefundMix(t *testing.T) {
	const n = 20000
	count := map[refundFate]int{}
	for i := range n {
		f := pickRefundFate()
		count[f]++
		cents := int64(1 + i%500)
		first, second, two := refundAmounts(f, cents)
		switch {
		case first < 0 || first > cents || second < 0:
			t.Fatalf("fate %d of %d: asks %d and %d", f, cents, first, second)
		case f == refundPart && (two || (first == cents && cents > 1)):
			t.Fatalf("in part of %d: asks %d (second %v)", cents, first, two)
		case f == refundRace && (!two || (first > 0 && first+second <= cents)):
			t.Fatalf("racing refunds of %d: ask %d and %d, together no more than it", cents, first, second)
		case f == refundBeyond && (!two || (first > 0 && second <= cents-first) || (first == 0 && second == 0)):
			t.Fatalf("beyond of %d: asks %d then %d, within what remains", cents, first, second)
		}
	}
	for f, share := range refundShares {
		if got := 100 * float64(count[refundFate(f)]) / n; math.Abs(got-float64(share)) > 2 {
			t.Errorf("fate %d: %.1f%% of the refunds, want %d%%", f, got, share)
		}
	}
}
