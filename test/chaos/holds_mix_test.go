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
		r, p := asHold(transferReq{From: "A", To: "B", AmountCents: 10, Currency: "BRL"}, now)
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
	if r, _ := asHold(transferReq{}, now); r.Capture != history.CaptureManual {
		t.Errorf("captura %q, want %s", r.Capture, history.CaptureManual)
	}
}
