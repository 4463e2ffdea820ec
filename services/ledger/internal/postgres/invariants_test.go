package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
)

// errorsOf records the failures of the checks it is handed to, instead of
// failing the test.
type errorsOf struct {
	testing.TB
	errs []string
}

func (e *errorsOf) Helper() {}

func (e *errorsOf) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// TestInvariantsCatchBrokenTransfers shows that the invariant tying markers
// to postings fails on the faults it is there for: a settled transfer
// without postings, or with postings of another amount or other accounts,
// and a rejected transfer with postings. Each fault is written by hand on
// a ledger that settled one transfer.
func TestInvariantsCatchBrokenTransfers(t *testing.T) {
	t.Parallel()
	const invariant = "a settled transfer has its two postings"
	faults := []struct {
		name, sql string
	}{
		{"none: the ledger as it settled", ``},
		{"a settled transfer without postings", `
INSERT INTO processed_transfer (transfer_id, result, source_account, dest_account, amount_cents, currency, event_id)
VALUES (gen_random_uuid(), 'LIQUIDADA', 'CC-001', 'CC-002', 5, 'BRL', gen_random_uuid())`},
		{"postings of another amount", `UPDATE processed_transfer SET amount_cents = amount_cents + 1`},
		{"postings from another account", `UPDATE processed_transfer SET source_account = 'CC-003'`},
		{"postings to another account", `UPDATE processed_transfer SET dest_account = 'CC-003'`},
		{"a rejected transfer with postings", `UPDATE processed_transfer SET result = 'REJEITADA', reason = 'SALDO_INSUFICIENTE'`},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s, db := newStore(t)
			open(t, s, "CC-001", "BRL", 100)
			open(t, s, "CC-002", "BRL", 0)
			open(t, s, "CC-003", "BRL", 0)
			if rs := settle(t, s, transfer("CC-001", "CC-002", 40, "BRL")); rs[0].Outcome != ledger.Settled {
				t.Fatalf("setup: outcome %v, want settled", rs[0].Outcome)
			}
			if f.sql != "" {
				if _, err := db.Exec(context.Background(), f.sql); err != nil {
					t.Fatal(err)
				}
			}
			rec := &errorsOf{TB: t}
			ledgertest.CheckInvariants(rec, db)
			caught := false
			for _, e := range rec.errs {
				caught = caught || strings.Contains(e, invariant)
			}
			if want := f.sql != ""; caught != want {
				t.Errorf("invariant %q failed: %v, want %v (failures: %q)", invariant, caught, want, rec.errs)
			}
		})
	}
}

// checkBreaks writes the fault sql into db and checks that
// ledgertest.CheckInvariants then fails invariant; with no sql (the ledger
// as it is), that it fails none.
func checkBreaks(t *testing.T, db *pgplatform.DB, sql, invariant string) {
	t.Helper()
	if sql != "" {
		if _, err := db.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	rec := &errorsOf{TB: t}
	ledgertest.CheckInvariants(rec, db)
	if sql == "" {
		if len(rec.errs) > 0 {
			t.Errorf("invariants failed on a sound ledger: %q", rec.errs)
		}
		return
	}
	caught := false
	for _, e := range rec.errs {
		caught = caught || strings.Contains(e, invariant)
	}
	if !caught {
		t.Errorf("invariant %q did not fail (failures: %q)", invariant, rec.errs)
	}
}
