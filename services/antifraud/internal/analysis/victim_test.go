package analysis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
)

// TestAnotherClientCannotLockTheTitularOut is the lock-out attack: client
// B requests the velocity limit's worth of 1-cent transfers from client A's
// account to accounts that do not exist. The ledger will reject every one
// (ORIGEM_NAO_AUTORIZADA), but antifraud decides first; they count toward
// B's quota on that account only, so A's own next transfer is approved,
// and B's next one is blocked by B's own quota.
func TestAnotherClientCannotLockTheTitularOut(t *testing.T) {
	t.Parallel()
	cfg := risk.DefaultConfig()
	dsn := newDSN(t)
	svc := newService(t, dsn, cfg)
	ctx := context.Background()
	now := time.Now().Add(-time.Minute)
	by := func(client string, dest string, amount int64) events.Requested {
		r := request("CC-ANA", amount, now)
		r.ClientID, r.DestAccount = client, dest
		return r
	}
	outcomes := map[analysis.Outcome]int{}
	for i := range cfg.VelocityMaxCount {
		res, err := svc.Analyse(ctx, by("bruno", fmt.Sprintf("CC-NOPE-%d", i), 1))
		if err != nil {
			t.Fatal(err)
		}
		outcomes[res.Decision.Outcome]++
	}
	if diff := cmp.Diff(map[analysis.Outcome]int{analysis.Approved: int(cfg.VelocityMaxCount)}, outcomes); diff != "" {
		t.Fatalf("the attacker's transfers (-want +got):\n%s", diff)
	}

	tests := []struct {
		name   string
		req    events.Requested
		want   analysis.Outcome
		client string
	}{
		{"the titular's own transfer", by("ana", "CC-BIA", 30_000), analysis.Approved, "ana"},
		{"the attacker, over his own quota", by("bruno", "CC-NOPE-X", 1), analysis.Blocked, "bruno"},
		{"the titular again", by("ana", "CC-BIA", 30_000), analysis.Approved, "ana"},
	}
	for _, tc := range tests {
		res, err := svc.Analyse(ctx, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Outcome != tc.want || res.Decision.ClientID != tc.client {
			t.Errorf("%s: %s for client %q, want %s for %q (rules %v)", tc.name, res.Decision.Outcome,
				res.Decision.ClientID, tc.want, tc.client, res.Decision.Rules)
		}
	}

	// The approved request's TransferenciaAnalisada carries its clienteId
	// on to the ledger, which checks it against the titular.
	rows := outboxRows(t, dsn)
	last := rows[len(rows)-1]
	if last.Type != events.TypeAnalysed || last.Payload["clienteId"] != "ana" {
		t.Errorf("last event %s %v, want %s with clienteId ana", last.Type, last.Payload, events.TypeAnalysed)
	}
}

// TestRequestsWithoutClientShareOneQuota: requests that name no client
// (producers that predate clienteId) are counted together per account, as
// every request was before clients were known.
func TestRequestsWithoutClientShareOneQuota(t *testing.T) {
	t.Parallel()
	cfg := risk.DefaultConfig()
	cfg.VelocityMaxCount = 2
	svc := newService(t, newDSN(t), cfg)
	now := time.Now().Add(-time.Minute)
	var got []analysis.Outcome
	for range 3 {
		res, err := svc.Analyse(context.Background(), request("CC-001", 100, now))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Decision.Outcome)
	}
	if diff := cmp.Diff([]analysis.Outcome{analysis.Approved, analysis.Approved, analysis.Blocked}, got); diff != "" {
		t.Errorf("outcomes mismatch (-want +got):\n%s", diff)
	}
}
