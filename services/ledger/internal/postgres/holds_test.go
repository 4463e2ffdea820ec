package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	pgplatform "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
	"github.com/paysuite/payments/services/ledger/internal/postgres"
)

// expiresAt is the expiry of the tests' holds: a minute after at.
var expiresAt = at.Add(time.Minute)

// rules are the tests' rules: ownership enforced with the ledgertest keys.
var rules = ledger.Rules{Topics: ledgertest.Topics, Keys: ledgertest.TransferKeys}

// hold is a hold of ledgertest.Client expiring at expiresAt, signed as
// the transfers service signs a hold (its captura and expiraEm included).
func hold(src, dst string, cents int64) ledger.Transfer {
	t := transfer(src, dst, cents, "BRL")
	t.Hold, t.ExpiresAt = true, expiresAt
	return signed(t)
}

func captureOf(t ledger.Transfer, cents int64) ledger.Command {
	return ledger.Command{Kind: ledger.Capture, TransferID: t.ID, EventID: uuid.New(), Source: t.Source, AmountCents: cents,
		ClientID: ledgertest.Client}
}

func cancelOf(t ledger.Transfer) ledger.Command {
	return ledger.Command{Kind: ledger.Cancel, TransferID: t.ID, EventID: uuid.New(), Source: t.Source, ClientID: ledgertest.Client}
}

// held is a ledger where CC-001 holds 60,000 of its 100,000 for CC-002:
// the store, its database and the hold.
func held(tb testing.TB) (*postgres.Store, *pgplatform.DB, ledger.Transfer) {
	tb.Helper()
	s, db := newStore(tb)
	open(tb, s, "CC-001", "BRL", 100_000)
	open(tb, s, "CC-002", "BRL", 0)
	h := hold("CC-001", "CC-002", 60_000)
	if rs := settle(tb, s, h); rs[0].Outcome != ledger.Reserved {
		tb.Fatalf("hold: %+v, want reserved", rs[0])
	}
	return s, db, h
}

// closeAt applies cs at now and fails the test on error.
func closeAt(tb testing.TB, s *postgres.Store, now time.Time, cs ...ledger.Command) []ledger.Result {
	tb.Helper()
	rs, err := s.CloseReservations(context.Background(), cs, rules.Closer(now))
	if err != nil {
		tb.Fatalf("close: %v", err)
	}
	return rs
}

// money is an account's balance and reserved amount.
type money struct{ Balance, Reserved int64 }

func moneyOf(tb testing.TB, db *pgplatform.DB, id string) money {
	tb.Helper()
	var m money
	if err := db.QueryRow(context.Background(), `SELECT balance_cents, reserved_cents FROM account WHERE id = $1`, id).
		Scan(&m.Balance, &m.Reserved); err != nil {
		tb.Fatalf("read account %s: %v", id, err)
	}
	return m
}

// reservationState is the state of transfer id's reservation.
func reservationState(tb testing.TB, db *pgplatform.DB, id uuid.UUID) (state string, captured int64, closedBy *uuid.UUID) {
	tb.Helper()
	if err := db.QueryRow(context.Background(),
		`SELECT state, coalesce(captured_cents, 0), closed_by FROM reservation WHERE transfer_id = $1`, id).
		Scan(&state, &captured, &closedBy); err != nil {
		tb.Fatalf("read reservation %s: %v", id, err)
	}
	return state, captured, closedBy
}

// lastEvent is the newest outbox event.
func lastEvent(tb testing.TB, db *pgplatform.DB) ledgertest.Event {
	tb.Helper()
	evs := ledgertest.ReadState(tb, db).Events
	if len(evs) == 0 {
		tb.Fatal("no event in the outbox")
	}
	return evs[len(evs)-1]
}

// TestHoldReservesAgainstTheAvailableBalance: a hold reserves its amount
// (balance unchanged, reserved up, TransferenciaReservada in the outbox);
// from then on immediate transfers and holds are checked against the
// available balance, not the balance.
func TestHoldReservesAgainstTheAvailableBalance(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", 100_000)
	open(t, s, "CC-002", "BRL", 0)

	h := hold("CC-001", "CC-002", 60_000)
	if rs := settle(t, s, h); rs[0].Outcome != ledger.Reserved {
		t.Fatalf("hold: %+v, want reserved", rs[0])
	}
	if got, want := moneyOf(t, db, "CC-001"), (money{100_000, 60_000}); got != want {
		t.Errorf("source after the hold = %+v, want %+v", got, want)
	}
	e := lastEvent(t, db)
	wantPayload := map[string]any{"eventoId": events.DerivedID(events.KindReserved, h.ID).String(), "transferenciaId": h.ID.String(),
		"valorEmCentavos": 60_000.0, "expiraEm": expiresAt.Format(time.RFC3339), "ocorridoEm": at.Format(time.RFC3339)}
	if e.Type != events.TypeReserved || e.Topic != ledgertest.Topics.Reserved || e.Key != "CC-001" {
		t.Errorf("event %s on %s keyed %s, want %s on %s keyed CC-001", e.Type, e.Topic, e.Key, events.TypeReserved, ledgertest.Topics.Reserved)
	}
	if diff := cmp.Diff(wantPayload, e.Payload); diff != "" {
		t.Errorf("TransferenciaReservada mismatch (-want +got):\n%s", diff)
	}

	// Available: 40,000.
	steps := []struct {
		name string
		t    ledger.Transfer
		want ledger.Result
	}{
		{"an immediate transfer over the available balance", transfer("CC-001", "CC-002", 40_001, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonInsufficientFunds}},
		{"a hold over the available balance", hold("CC-001", "CC-002", 40_001),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonInsufficientFunds}},
		{"a hold of the available balance", hold("CC-001", "CC-002", 30_000), ledger.Result{Outcome: ledger.Reserved}},
		{"an immediate transfer of what remains available", transfer("CC-001", "CC-002", 10_000, "BRL"),
			ledger.Result{Outcome: ledger.Settled}},
		{"anything more", transfer("CC-001", "CC-002", 1, "BRL"),
			ledger.Result{Outcome: ledger.Rejected, Reason: ledger.ReasonInsufficientFunds}},
	}
	for _, st := range steps {
		st.want.TransferID = st.t.ID
		if got := settle(t, s, st.t)[0]; got != st.want {
			t.Errorf("%s: %+v, want %+v", st.name, got, st.want)
		}
	}
	if got, want := moneyOf(t, db, "CC-001"), (money{90_000, 90_000}); got != want {
		t.Errorf("source at the end = %+v, want %+v", got, want)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestHoldInABatchSeesTheEarlierOnes: holds and transfers of one batch
// are decided in order, each against what the earlier ones left
// available, as if one by one.
func TestHoldInABatchSeesTheEarlierOnes(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", 100)
	open(t, s, "CC-002", "BRL", 0)
	h1, tr, h2 := hold("CC-001", "CC-002", 60), transfer("CC-001", "CC-002", 50, "BRL"), hold("CC-001", "CC-002", 40)
	rs := settle(t, s, h1, tr, h1, h2)
	want := []ledger.Result{{TransferID: h1.ID, Outcome: ledger.Reserved},
		{TransferID: tr.ID, Outcome: ledger.Rejected, Reason: ledger.ReasonInsufficientFunds},
		{TransferID: h1.ID, Outcome: ledger.Duplicate}, {TransferID: h2.ID, Outcome: ledger.Reserved}}
	if diff := cmp.Diff(want, rs); diff != "" {
		t.Errorf("results mismatch (-want +got):\n%s", diff)
	}
	if got, want := moneyOf(t, db, "CC-001"), (money{100, 100}); got != want {
		t.Errorf("source = %+v, want %+v", got, want)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestCloseReservation: each way a reservation closes, what it posts,
// what it releases and the event that says so.
func TestCloseReservation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		command   func(ledger.Transfer) ledger.Command
		now       time.Time
		want      ledger.Outcome
		state     string
		source    money // CC-001 after, from 100,000 with 60,000 held
		dest      int64
		eventType string
		payload   map[string]any // beside eventoId, transferenciaId, ocorridoEm
	}{
		{"capture of all", func(h ledger.Transfer) ledger.Command { return captureOf(h, 60_000) }, at,
			ledger.Settled, "captured", money{40_000, 0}, 60_000, events.TypeSettled, map[string]any{"valorEmCentavos": 60_000.0, "titularDestino": ledgertest.Client}},
		{"capture of a part releases the rest", func(h ledger.Transfer) ledger.Command { return captureOf(h, 25_000) }, at,
			ledger.Settled, "captured", money{75_000, 0}, 25_000, events.TypeSettled, map[string]any{"valorEmCentavos": 25_000.0, "titularDestino": ledgertest.Client}},
		{"cancellation", cancelOf, at,
			ledger.Cancelled, "cancelled", money{100_000, 0}, 0, events.TypeCancelled, map[string]any{"motivo": "CANCELADA_PELO_CLIENTE"}},
		{"capture past the expiry expires", func(h ledger.Transfer) ledger.Command { return captureOf(h, 60_000) }, expiresAt,
			ledger.Expired, "expired", money{100_000, 0}, 0, events.TypeCancelled, map[string]any{"motivo": "EXPIRADA"}},
		{"cancellation past the expiry expires", cancelOf, expiresAt.Add(time.Hour),
			ledger.Expired, "expired", money{100_000, 0}, 0, events.TypeCancelled, map[string]any{"motivo": "EXPIRADA"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, db, h := held(t)
			c := tc.command(h)
			rs := closeAt(t, s, tc.now, c)
			if rs[0].TransferID != h.ID || rs[0].Outcome != tc.want {
				t.Fatalf("result %+v, want %s", rs[0], tc.want)
			}
			if got := moneyOf(t, db, "CC-001"); got != tc.source {
				t.Errorf("source = %+v, want %+v", got, tc.source)
			}
			if got := moneyOf(t, db, "CC-002"); got.Balance != tc.dest {
				t.Errorf("destination balance = %d, want %d", got.Balance, tc.dest)
			}
			state, _, closedBy := reservationState(t, db, h.ID)
			if state != tc.state {
				t.Errorf("reservation state = %s, want %s", state, tc.state)
			}
			if byCommand := tc.state != "expired"; byCommand != (closedBy != nil && *closedBy == c.EventID) {
				t.Errorf("reservation closed by %v, want the command %v: %v", closedBy, c.EventID, byCommand)
			}
			e := lastEvent(t, db)
			kind, topic := events.KindCancelled, ledgertest.Topics.Cancelled
			if tc.eventType == events.TypeSettled {
				kind, topic = events.KindSettled, ledgertest.Topics.Settled
			}
			want := map[string]any{"eventoId": events.DerivedID(kind, h.ID).String(), "transferenciaId": h.ID.String(),
				"ocorridoEm": tc.now.Format(time.RFC3339)}
			for k, v := range tc.payload {
				want[k] = v
			}
			if e.Type != tc.eventType || e.Topic != topic || e.Key != "CC-001" || e.Headers[events.HeaderCorrelationID] != h.ID.String() {
				t.Errorf("event %s on %s keyed %s (headers %v), want %s on %s keyed CC-001", e.Type, e.Topic, e.Key, e.Headers, tc.eventType, topic)
			}
			if diff := cmp.Diff(want, e.Payload); diff != "" {
				t.Errorf("event payload mismatch (-want +got):\n%s", diff)
			}
			ledgertest.CheckInvariants(t, db)
		})
	}
}

// TestCloseIsIdempotent: once a reservation is closed, the same command
// again, or any other, changes nothing and says AlreadyClosed.
func TestCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	s, db, h := held(t)
	c := captureOf(h, 10_000)
	closeAt(t, s, at, c)
	before := ledgertest.ReadState(t, db)
	for _, again := range []ledger.Command{c, captureOf(h, 60_000), cancelOf(h)} {
		if rs := closeAt(t, s, at, again); rs[0].Outcome != ledger.AlreadyClosed {
			t.Errorf("command %d after the capture: %+v, want already closed", again.Kind, rs[0])
		}
	}
	if rs, err := s.ExpireDue(context.Background(), expiresAt.Add(time.Hour), 10, rules.Closer(expiresAt.Add(time.Hour))); err != nil || len(rs) != 0 {
		t.Errorf("expiry after the capture: %v, %v; want nothing expired", rs, err)
	}
	if diff := cmp.Diff(before, ledgertest.ReadState(t, db)); diff != "" {
		t.Errorf("a closed reservation changed (-before +after):\n%s", diff)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestCloseRefusesWhatIsNotAHold: a command for a transfer the ledger has
// not reserved, or that does not fit its reservation, is a permanent
// error (a dead letter), never a result, and writes nothing.
func TestCloseRefusesWhatIsNotAHold(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", 100_000)
	open(t, s, "CC-002", "BRL", 0)
	h, settled, rejected := hold("CC-001", "CC-002", 60_000), transfer("CC-001", "CC-002", 1, "BRL"), hold("CC-002", "CC-001", 2)
	settle(t, s, h, settled, rejected)
	otherClient, otherSource, noClient := cancelOf(h), cancelOf(h), captureOf(h, 1)
	otherClient.ClientID, otherSource.Source, noClient.ClientID = "client-b", "CC-002", ""
	tests := []struct {
		name string
		c    ledger.Command
		want error
	}{
		{"an unknown transfer", captureOf(transfer("CC-001", "CC-002", 1, "BRL"), 1), ledger.ErrNotReserved},
		{"a transfer settled at once", captureOf(settled, 1), ledger.ErrNotReserved},
		{"a rejected hold", cancelOf(rejected), ledger.ErrNotReserved},
		{"a capture over the reservation", captureOf(h, 60_001), ledger.ErrCaptureAmount},
		{"a capture of nothing", captureOf(h, 0), ledger.ErrCaptureAmount},
		{"another client", otherClient, ledger.ErrForeignCommand},
		{"no client", noClient, ledger.ErrForeignCommand},
		{"another source account", otherSource, ledger.ErrForeignCommand},
	}
	before := ledgertest.ReadState(t, db)
	for _, tc := range tests {
		_, err := s.CloseReservations(context.Background(), []ledger.Command{tc.c}, rules.Closer(at))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		// In a batch, the bad command fails the whole batch.
		_, err = s.CloseReservations(context.Background(), []ledger.Command{cancelOf(h), tc.c}, rules.Closer(at))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s in a batch: %v, want %v", tc.name, err, tc.want)
		}
	}
	if diff := cmp.Diff(before, ledgertest.ReadState(t, db)); diff != "" {
		t.Errorf("refused commands wrote (-before +after):\n%s", diff)
	}
	// With ownership off, the client is not checked.
	off := ledger.Rules{Topics: ledgertest.Topics, Ownership: ledger.OwnershipOff}
	if rs, err := s.CloseReservations(context.Background(), []ledger.Command{otherClient}, off.Closer(at)); err != nil || rs[0].Outcome != ledger.Cancelled {
		t.Errorf("another client's cancellation with ownership off: %v, %v; want cancelled", rs, err)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestCloseBatchIsOneByOne: a batch of commands has the results of
// applying them one after the other, the race of two commands on one
// reservation included.
func TestCloseBatchIsOneByOne(t *testing.T) {
	t.Parallel()
	var states []ledgertest.State
	for _, batched := range []bool{false, true} {
		s, db := newStore(t)
		open(t, s, "CC-001", "BRL", 100_000)
		open(t, s, "CC-002", "BRL", 0)
		open(t, s, "CC-003", "BRL", 0)
		id := func(n int) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint("hold ", n))) }
		var hs []ledger.Transfer
		for n, dst := range []string{"CC-002", "CC-003", "CC-002"} {
			h := hold("CC-001", dst, 10_000)
			h.ID, h.EventID = id(n), id(n+10)
			hs = append(hs, signed(h))
		}
		settle(t, s, hs...)
		cs := []ledger.Command{captureOf(hs[1], 5_000), cancelOf(hs[0]), captureOf(hs[0], 1), cancelOf(hs[2]), captureOf(hs[1], 10_000)}
		for i := range cs {
			cs[i].EventID = id(i + 20)
		}
		var rs []ledger.Result
		if batched {
			rs = closeAt(t, s, at, cs...)
		} else {
			for _, c := range cs {
				rs = append(rs, closeAt(t, s, at, c)...)
			}
		}
		want := []ledger.Outcome{ledger.Settled, ledger.Cancelled, ledger.AlreadyClosed, ledger.Cancelled, ledger.AlreadyClosed}
		for i, r := range rs {
			if r.Outcome != want[i] {
				t.Errorf("batched %v: command %d: %s, want %s", batched, i, r.Outcome, want[i])
			}
		}
		ledgertest.CheckInvariants(t, db)
		st := ledgertest.ReadState(t, db)
		for i := range st.Postings {
			st.Postings[i].ID = 0
		}
		for i := range st.Events {
			st.Events[i].OccurredAt = time.Time{}
		}
		states = append(states, st)
	}
	if diff := cmp.Diff(states[0], states[1]); diff != "" {
		t.Errorf("batch differs from one by one (-one by one +batch):\n%s", diff)
	}
}

// TestExpireDue: the sweep releases the open reservations past their
// expiry, oldest first, at most limit at a time, and nothing else.
func TestExpireDue(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", 100_000)
	open(t, s, "CC-002", "BRL", 0)
	var hs []ledger.Transfer
	for i := range 4 {
		h := hold("CC-001", "CC-002", 1_000)
		h.ExpiresAt = at.Add(time.Duration(i+1) * time.Minute)
		hs = append(hs, signed(h))
	}
	settle(t, s, hs...)
	closeAt(t, s, at, cancelOf(hs[0]))
	sweep := func(now time.Time, limit int) []ledger.Result {
		t.Helper()
		rs, err := s.ExpireDue(context.Background(), now, limit, rules.Closer(now))
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	if rs := sweep(at.Add(time.Minute), 10); len(rs) != 0 {
		t.Errorf("due at +1m, only the cancelled one: expired %v", rs)
	}
	if rs := sweep(at.Add(3*time.Minute), 1); len(rs) != 1 || rs[0].TransferID != hs[1].ID || rs[0].Outcome != ledger.Expired ||
		rs[0].Reason != events.ReasonExpired {
		t.Errorf("limit 1 at +3m: %v, want the one due at +2m", rs)
	}
	if rs := sweep(at.Add(3*time.Minute), 10); len(rs) != 1 || rs[0].TransferID != hs[2].ID {
		t.Errorf("again at +3m: %v, want the one due at +3m", rs)
	}
	if got, want := moneyOf(t, db, "CC-001"), (money{100_000, 1_000}); got != want {
		t.Errorf("source = %+v, want %+v (the last hold still open)", got, want)
	}
	if state, _, _ := reservationState(t, db, hs[3].ID); state != "open" {
		t.Errorf("the hold due at +4m is %s, want open", state)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestHoldRace: capture, cancellation and expiry of one reservation race,
// each in its own transaction, as three ledger instances would (the
// sweeping one with its clock past the expiry). For every reservation
// exactly one wins; the others change nothing; the reservation is
// released once and the books balance.
func TestHoldRace(t *testing.T) {
	t.Parallel()
	const holds = 60
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", holds*1_000)
	open(t, s, "CC-002", "BRL", 0)
	open(t, s, "CC-003", "BRL", 0)
	now := func() time.Time { return at }
	later := func() time.Time { return expiresAt.Add(time.Second) }
	commands := ledger.NewService(s, rules, now)
	sweeper := ledger.NewService(s, rules, later)
	ctx := context.Background()
	for i := range holds {
		dst := []string{"CC-002", "CC-003"}[i%2]
		h := hold("CC-001", dst, 1_000)
		settle(t, s, h)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			won     []ledger.Outcome
			failure error
		)
		record := func(r ledger.Result, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failure = err
			case r.Outcome != ledger.AlreadyClosed:
				won = append(won, r.Outcome)
			}
		}
		wg.Go(func() { record(commands.CloseReservation(ctx, captureOf(h, int64(1+i*13%1_000)))) })
		wg.Go(func() { record(commands.CloseReservation(ctx, cancelOf(h))) })
		wg.Go(func() {
			rs, err := sweeper.ExpireDue(ctx, 5)
			for _, r := range rs {
				record(r, nil)
			}
			if err != nil {
				record(ledger.Result{}, err)
			}
		})
		wg.Wait()
		if failure != nil {
			t.Fatalf("hold %d: %v", i, failure)
		}
		if len(won) != 1 {
			t.Fatalf("hold %d: winners %v, want exactly one", i, won)
		}
		state, captured, _ := reservationState(t, db, h.ID)
		if want := map[ledger.Outcome]string{ledger.Settled: "captured", ledger.Cancelled: "cancelled", ledger.Expired: "expired"}[won[0]]; state != want {
			t.Fatalf("hold %d: %s won, reservation %s", i, won[0], state)
		}
		if captured > 1_000 {
			t.Fatalf("hold %d: captured %d of 1000", i, captured)
		}
	}
	if got := moneyOf(t, db, "CC-001"); got.Reserved != 0 {
		t.Errorf("reserved after every hold closed = %d, want 0", got.Reserved)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestConcurrentSweepsReleaseOnce: sweeps running at once, as every ledger
// instance runs one, share the due reservations and release each once.
func TestConcurrentSweepsReleaseOnce(t *testing.T) {
	t.Parallel()
	const (
		holds    = 200
		sweepers = 4
	)
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", holds)
	open(t, s, "CC-002", "BRL", 0)
	var hs []ledger.Transfer
	for range holds {
		hs = append(hs, hold("CC-001", "CC-002", 1))
	}
	for len(hs) > 0 {
		settle(t, s, hs[:50]...)
		hs = hs[50:]
	}
	svc := ledger.NewService(s, rules, func() time.Time { return expiresAt })
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		expired = map[uuid.UUID]int{}
		errs    []error
	)
	for range sweepers {
		wg.Go(func() {
			for {
				rs, err := svc.ExpireDue(context.Background(), 7)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, r := range rs {
					expired[r.TransferID]++
				}
				mu.Unlock()
				if err != nil || len(rs) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var sweptAgain, left int
	for _, n := range expired {
		if n != 1 {
			sweptAgain++
		}
	}
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM reservation WHERE state = 'open'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if len(expired) != holds || sweptAgain != 0 || left != 0 {
		t.Errorf("expired %d reservations (%d more than once), %d left open; want %d, each once, none left", len(expired), sweptAgain, left, holds)
	}
	ledgertest.CheckInvariants(t, db)
}

// TestRunExpiry: the sweep loop releases what falls due and returns when
// its context ends.
func TestRunExpiry(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	open(t, s, "CC-001", "BRL", 10)
	open(t, s, "CC-002", "BRL", 0)
	var hs []ledger.Transfer
	for range 5 {
		hs = append(hs, hold("CC-001", "CC-002", 1))
	}
	settle(t, s, hs...)
	svc := ledger.NewService(s, rules, func() time.Time { return expiresAt })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunExpiry(ctx, 10*time.Millisecond, 2, slog.New(slog.DiscardHandler), nil)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for moneyOf(t, db, "CC-001").Reserved != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("reservations still held after 30 s: %+v", moneyOf(t, db, "CC-001"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RunExpiry did not return after its context ended")
	}
	ledgertest.CheckInvariants(t, db)
}

// TestInvariantsCatchBrokenHolds shows that the invariants of holds fail
// on the faults they are there for, each written by hand on a ledger that
// holds one open reservation and one captured, cancelled and expired each.
func TestInvariantsCatchBrokenHolds(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name, invariant, sql string
	}{
		{"none: the ledger as it held", "", ``},
		{"a reservation released twice: a second closing event", "exactly one closing event", `
INSERT INTO outbox_event (id, aggregate_type, aggregate_id, topic, key, event_type, payload, occurred_at)
SELECT gen_random_uuid(), aggregate_type, aggregate_id, topic, key, event_type, payload, occurred_at
FROM outbox_event WHERE event_type = 'TransferenciaCancelada' LIMIT 1`},
		{"a reservation released twice: the amount released again", "equals the sum of its open reservations", `
UPDATE account SET reserved_cents = reserved_cents - 1 WHERE id = 'CC-001'`},
		{"an open reservation no longer counted", "equals the sum of its open reservations", `
UPDATE account SET reserved_cents = 0 WHERE id = 'CC-001'`},
		{"a cancelled reservation turned captured without postings", "a captured hold", `
UPDATE reservation SET state = 'captured', captured_cents = 1 WHERE state = 'cancelled'`},
		{"a captured reservation reopened", "equals the sum of its open reservations", `
UPDATE reservation SET state = 'open', captured_cents = NULL, closed_by = NULL, closed_event_id = NULL, closed_at = NULL
WHERE state = 'captured'`},
		{"an expiry announced as the client's cancellation", "exactly one closing event", `
UPDATE outbox_event SET payload = jsonb_set(payload, '{motivo}', '"CANCELADA_PELO_CLIENTE"')
WHERE payload->>'motivo' = 'EXPIRADA'`},
		{"a capture announced with another amount", "exactly one closing event", `
UPDATE outbox_event SET payload = jsonb_set(payload, '{valorEmCentavos}', '2')
WHERE event_type = 'TransferenciaLiquidada'`},
		{"a hold without its reservation", "every hold has its reservation", `
DELETE FROM reservation WHERE state = 'open'`},
		{"a reservation of another amount than its hold", "the hold its marker decided", `
UPDATE processed_transfer SET amount_cents = amount_cents + 1 WHERE result = 'RESERVADA'`},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s, db := newStore(t)
			open(t, s, "CC-001", "BRL", 100)
			open(t, s, "CC-002", "BRL", 0)
			hs := []ledger.Transfer{hold("CC-001", "CC-002", 10), hold("CC-001", "CC-002", 10), hold("CC-001", "CC-002", 10),
				hold("CC-001", "CC-002", 10)}
			hs[3].ExpiresAt = at
			hs[3] = signed(hs[3])
			settle(t, s, hs...)
			closeAt(t, s, at, captureOf(hs[1], 4), cancelOf(hs[2]))
			if rs, err := s.ExpireDue(context.Background(), at, 10, rules.Closer(at)); err != nil || len(rs) != 1 {
				t.Fatalf("setup: expired %v, %v; want one", rs, err)
			}
			if f.sql != "" {
				if _, err := db.Exec(context.Background(), f.sql); err != nil {
					t.Fatal(err)
				}
			}
			rec := &errorsOf{TB: t}
			ledgertest.CheckInvariants(rec, db)
			if f.sql == "" {
				if len(rec.errs) > 0 {
					t.Errorf("invariants failed on a sound ledger: %q", rec.errs)
				}
				return
			}
			caught := false
			for _, e := range rec.errs {
				caught = caught || strings.Contains(e, f.invariant)
			}
			if !caught {
				t.Errorf("invariant %q did not fail (failures: %q)", f.invariant, rec.errs)
			}
		})
	}
}
