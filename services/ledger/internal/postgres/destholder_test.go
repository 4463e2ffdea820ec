package postgres_test

import (
	"context"
	"testing"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
)

// TestSettlementNamesTheDestinationHolder: TransferenciaLiquidada carries
// titularDestino, the titular of the account paid into (not the client who
// paid), for an immediate settlement and for a hold's capture; a rejection
// and a reservation name nobody.
func TestSettlementNamesTheDestinationHolder(t *testing.T) {
	t.Parallel()
	const payee = "loja-bruno"
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", 100_000)
	if _, _, err := s.CreateAccount(context.Background(), "CC-LOJA", "BRL", payee); err != nil {
		t.Fatal(err)
	}
	holderIn := func(e ledgertest.Event) any { return e.Payload["titularDestino"] }

	if rs := settle(t, s, transfer("CC-001", "CC-LOJA", 10_000, "BRL")); rs[0].Outcome != ledger.Settled {
		t.Fatalf("immediate transfer: %+v", rs[0])
	}
	if e := lastEvent(t, db); e.Type != events.TypeSettled || holderIn(e) != payee {
		t.Errorf("immediate settlement: %s with titularDestino %v, want %s with %s", e.Type, holderIn(e), events.TypeSettled, payee)
	}

	if rs := settle(t, s, transfer("CC-001", "CC-LOJA", 1_000_000, "BRL")); rs[0].Outcome != ledger.Rejected {
		t.Fatalf("transfer over the balance: %+v", rs[0])
	}
	if e := lastEvent(t, db); e.Type != events.TypeRejected || holderIn(e) != nil {
		t.Errorf("rejection: %s with titularDestino %v, want %s with none", e.Type, holderIn(e), events.TypeRejected)
	}

	h := hold("CC-001", "CC-LOJA", 20_000)
	if rs := settle(t, s, h); rs[0].Outcome != ledger.Reserved {
		t.Fatalf("hold: %+v", rs[0])
	}
	if e := lastEvent(t, db); e.Type != events.TypeReserved || holderIn(e) != nil {
		t.Errorf("reservation: %s with titularDestino %v, want %s with none", e.Type, holderIn(e), events.TypeReserved)
	}
	if rs := closeAt(t, s, at, captureOf(h, 5_000)); rs[0].Outcome != ledger.Settled {
		t.Fatalf("capture: %+v", rs[0])
	}
	if e := lastEvent(t, db); e.Type != events.TypeSettled || holderIn(e) != payee || e.Payload["valorEmCentavos"] != 5_000.0 {
		t.Errorf("capture: %s with titularDestino %v and %v, want %s with %s and 5000", e.Type, holderIn(e),
			e.Payload["valorEmCentavos"], events.TypeSettled, payee)
	}
	ledgertest.CheckInvariants(t, db)
}
