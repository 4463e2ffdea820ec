package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/pkg/validate"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	const ana, bruno = "ana", "bruno"
	brl := func(id string, bal int64) *ledger.Account {
		return &ledger.Account{ID: id, Currency: "BRL", BalanceCents: bal, Holder: ana}
	}
	signed, off, unproven := ledger.Signed, ledger.Unchecked, ledger.Unproven
	tests := []struct {
		name               string
		src, dst           *ledger.Account
		amount             int64
		currency           string
		client             string // the transfer's clienteId; "-" for none
		proof              ledger.Proof
		outcome            ledger.Outcome
		reason             string
		srcAfter, dstAfter int64
	}{
		{"settles", brl("A", 100), brl("B", 5), 60, "BRL", ana, signed, ledger.Settled, "", 40, 65},
		{"settles the whole balance", brl("A", 100), brl("B", 0), 100, "BRL", ana, signed, ledger.Settled, "", 0, 100},
		{"destination of another titular", brl("A", 100), &ledger.Account{ID: "B", Currency: "BRL", Holder: bruno}, 60, "BRL", ana, signed,
			ledger.Settled, "", 40, 60},
		{"source missing", nil, brl("B", 0), 1, "BRL", ana, signed, ledger.Rejected, ledger.ReasonAccountNotFound, 0, 0},
		{"destination missing", brl("A", 100), nil, 1, "BRL", ana, signed, ledger.Rejected, ledger.ReasonAccountNotFound, 100, 0},
		{"funding source", &ledger.Account{ID: "__FUNDING__BRL", Currency: "BRL", Funding: true, BalanceCents: -5}, brl("B", 0), 1, "BRL", ana, signed,
			ledger.Rejected, ledger.ReasonAccountNotFound, -5, 0},
		{"missing wins over currency", &ledger.Account{ID: "A", Currency: "USD", Holder: ana}, nil, 1, "BRL", ana, signed,
			ledger.Rejected, ledger.ReasonAccountNotFound, 0, 0},
		{"missing wins over ownership", brl("A", 100), nil, 1, "BRL", bruno, signed, ledger.Rejected, ledger.ReasonAccountNotFound, 100, 0},
		{"another client's source", brl("A", 100), brl("B", 0), 1, "BRL", bruno, signed, ledger.Rejected, ledger.ReasonUnauthorized, 100, 0},
		{"no client", brl("A", 100), brl("B", 0), 1, "BRL", "-", signed, ledger.Rejected, ledger.ReasonUnauthorized, 100, 0},
		{"source without a titular", &ledger.Account{ID: "A", Currency: "BRL", BalanceCents: 100}, brl("B", 0), 1, "BRL", ana, signed,
			ledger.Rejected, ledger.ReasonUnauthorized, 100, 0},
		{"no client and no titular", &ledger.Account{ID: "A", Currency: "BRL", BalanceCents: 100}, brl("B", 0), 1, "BRL", "-", signed,
			ledger.Rejected, ledger.ReasonUnauthorized, 100, 0},
		{"ownership wins over currency", &ledger.Account{ID: "A", Currency: "USD", BalanceCents: 100, Holder: ana}, brl("B", 0), 1, "BRL", bruno, signed,
			ledger.Rejected, ledger.ReasonUnauthorized, 100, 0},
		{"ownership wins over balance", brl("A", 0), brl("B", 0), 1, "BRL", bruno, signed, ledger.Rejected, ledger.ReasonUnauthorized, 0, 0},
		{"ownership off: no client settles", brl("A", 100), brl("B", 0), 1, "BRL", "-", off, ledger.Settled, "", 99, 1},
		{"ownership off: another client settles", brl("A", 100), brl("B", 0), 1, "BRL", bruno, off, ledger.Settled, "", 99, 1},
		{"ownership off: the other rules hold", brl("A", 0), brl("B", 0), 1, "BRL", "-", off, ledger.Rejected, ledger.ReasonInsufficientFunds, 0, 0},
		{"source currency", &ledger.Account{ID: "A", Currency: "USD", BalanceCents: 100, Holder: ana}, brl("B", 0), 1, "BRL", ana, signed,
			ledger.Rejected, ledger.ReasonCurrencyMismatch, 100, 0},
		{"destination currency", brl("A", 100), &ledger.Account{ID: "B", Currency: "USD"}, 1, "BRL", ana, signed,
			ledger.Rejected, ledger.ReasonCurrencyMismatch, 100, 0},
		{"currency wins over balance", brl("A", 0), brl("B", 0), 1, "USD", ana, signed, ledger.Rejected, ledger.ReasonCurrencyMismatch, 0, 0},
		{"insufficient", brl("A", 99), brl("B", 0), 100, "BRL", ana, signed, ledger.Rejected, ledger.ReasonInsufficientFunds, 99, 0},
		// Without a valid signature every record gets one answer, whatever
		// it names: nothing tells a prober which account exists or who
		// holds it.
		{"unproven: the titular's own", brl("A", 100), brl("B", 0), 1, "BRL", ana, unproven, ledger.Rejected, ledger.ReasonUnauthorized, 100, 0},
		{"unproven: another client", brl("A", 100), brl("B", 0), 1, "BRL", bruno, unproven, ledger.Rejected, ledger.ReasonUnauthorized, 100, 0},
		{"unproven: no client", brl("A", 100), brl("B", 0), 1, "BRL", "-", unproven, ledger.Rejected, ledger.ReasonUnauthorized, 100, 0},
		{"unproven wins over missing", nil, nil, 1, "BRL", ana, unproven, ledger.Rejected, ledger.ReasonUnauthorized, 0, 0},
		{"unproven wins over currency and balance", brl("A", 0), brl("B", 0), 1, "USD", ana, unproven, ledger.Rejected, ledger.ReasonUnauthorized, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client
			if client == "-" {
				client = ""
			}
			outcome, reason, _ := ledger.Decide(tc.src, tc.dst, ledger.Transfer{ID: uuid.New(), Source: "A", Dest: "B",
				AmountCents: tc.amount, Currency: tc.currency, ClientID: client}, tc.proof)
			if outcome != tc.outcome || reason != tc.reason {
				t.Errorf("Decide = %s %s, want %s %s", outcome, reason, tc.outcome, tc.reason)
			}
			var srcBal, dstBal int64
			if tc.src != nil {
				srcBal = tc.src.BalanceCents
			}
			if tc.dst != nil {
				dstBal = tc.dst.BalanceCents
			}
			if srcBal != tc.srcAfter || dstBal != tc.dstAfter {
				t.Errorf("balances after = %d, %d; want %d, %d", srcBal, dstBal, tc.srcAfter, tc.dstAfter)
			}
		})
	}
}

func TestDecideSameAccountLeavesBalance(t *testing.T) {
	t.Parallel()
	a := &ledger.Account{ID: "A", Currency: "BRL", BalanceCents: 10, Holder: "ana"}
	tr := ledger.Transfer{Source: "A", Dest: "A", AmountCents: 10, Currency: "BRL", ClientID: "ana"}
	if o, _, _ := ledger.Decide(a, a, tr, ledger.Signed); o != ledger.Settled || a.BalanceCents != 10 {
		t.Errorf("outcome %s balance %d, want settled and 10", o, a.BalanceCents)
	}
}

// stubStore is a Store whose methods record their arguments; only what the
// validation tests need.
type stubStore struct {
	ledger.Store
	called bool
}

func (s *stubStore) CreateAccount(context.Context, string, string, string) (ledger.Account, bool, error) {
	s.called = true
	return ledger.Account{}, true, nil
}

func (s *stubStore) Deposit(context.Context, ledger.DepositRequest) (ledger.Deposit, bool, error) {
	s.called = true
	return ledger.Deposit{}, false, nil
}

// Account is the account every stubStore holds: A, of "cliente".
func (s *stubStore) Account(context.Context, string) (ledger.Account, error) {
	return ledger.Account{ID: "A", Currency: "BRL", Holder: "cliente"}, nil
}

func (s *stubStore) Postings(context.Context, string, int64, int) ([]ledger.Posting, error) {
	s.called = true
	return nil, nil
}

func TestServiceValidatesBeforeTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reader := ledger.Reader{Client: "cliente"}
	// open, deposit and page build the service calls the cases make.
	open := func(id, currency, holder string) func(*ledger.Service) error {
		return func(s *ledger.Service) error {
			_, _, err := s.OpenAccount(ctx, id, currency, holder, false)
			return err
		}
	}
	deposit := func(account string, cents int64) func(*ledger.Service) error {
		return func(s *ledger.Service) error {
			_, _, err := s.Deposit(ctx, ledger.DepositRequest{ID: uuid.New(), AccountID: account, AmountCents: cents, ClientID: "cliente"})
			return err
		}
	}
	page := func(limit int) func(*ledger.Service) error {
		return func(s *ledger.Service) error { _, _, err := s.Postings(ctx, "A", 0, limit, reader); return err }
	}
	tests := []struct {
		name   string
		call   func(s *ledger.Service) error
		fields []string // invalid fields; nil: valid
		err    error
	}{
		{"valid account", open("CC-1.a_b", "BRL", "cliente"), nil, nil},
		{"32-character id", open("abcdefghijklmnopqrstuvwxyz012345", "BRL", "cliente"), nil, nil},
		{"33-character id", open("abcdefghijklmnopqrstuvwxyz0123456", "BRL", "cliente"), []string{"id"}, nil},
		{"empty id", open("", "BRL", "cliente"), []string{"id"}, nil},
		{"reserved prefix", open("__FUNDING__X", "BRL", "cliente"), []string{"id"}, nil},
		{"currency", open("A", "BRLL", "cliente"), []string{"moeda"}, nil},
		{"both", open("A B", "br", "cliente"), []string{"id", "moeda"}, nil},
		{"empty titular", open("A", "BRL", ""), []string{"titular"}, nil},
		{"255-byte titular", open("A", "BRL", strings.Repeat("x", 255)), nil, nil},
		{"255-character titular of 510 bytes", open("B", "BRL", strings.Repeat("é", 255)), nil, nil},
		{"titular with a NUL", open("A", "BRL", "a\x00b"), []string{"titular"}, nil},
		{"256-byte titular", open("A", "BRL", strings.Repeat("x", 256)), []string{"titular"}, nil},
		{"deposit of 1", deposit("A", 1), nil, nil},
		{"deposit of 10^15", deposit("A", 1e15), nil, nil},
		{"deposit of 0", deposit("A", 0), []string{"valorEmCentavos"}, nil},
		{"deposit above 10^15", deposit("A", 1e15+1), []string{"valorEmCentavos"}, nil},
		{"deposit to a malformed id", deposit("a b", 1), nil, ledger.ErrAccountNotFound},
		{"page of 200", page(200), nil, nil},
		{"page of 201", page(201), []string{"limite"}, nil},
		{"page of 0", page(0), []string{"limite"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &stubStore{}
			err := tc.call(ledger.NewService(store, ledger.Rules{}, time.Now))
			var ve *validate.ValidationError
			var fields []string
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					fields = append(fields, f.Field)
				}
			} else if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.fields, fields); diff != "" {
				t.Errorf("invalid fields mismatch (-want +got):\n%s", diff)
			}
			if wantCall := tc.fields == nil && tc.err == nil; store.called != wantCall {
				t.Errorf("store called = %v, want %v", store.called, wantCall)
			}
		})
	}
}

// A deposit above the configured ceiling is refused with a *CeilingError
// before the store sees it; at the ceiling it goes through.
func TestServiceRefusesDepositsAboveTheCeiling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &stubStore{}
	s := ledger.NewService(store, ledger.Rules{MaxDepositCents: 1_000}, time.Now)
	_, _, err := s.Deposit(ctx, ledger.DepositRequest{ID: uuid.New(), AccountID: "A", AmountCents: 1_001, ClientID: "c"})
	var ce *ledger.CeilingError
	if !errors.As(err, &ce) || ce.MaxCents != 1_000 || store.called {
		t.Fatalf("deposit of 1001 over a ceiling of 1000: err %v, store called %v; want a CeilingError of 1000 and no call", err, store.called)
	}
	if _, _, err := s.Deposit(ctx, ledger.DepositRequest{ID: uuid.New(), AccountID: "A", AmountCents: 1_000, ClientID: "c"}); err != nil || !store.called {
		t.Fatalf("deposit at the ceiling: err %v, store called %v", err, store.called)
	}
	if got := ledger.NewService(store, ledger.Rules{}, time.Now).MaxDepositCents(); got != ledger.MaxAmountCents {
		t.Errorf("ceiling of Rules{} = %d, want %d", got, int64(ledger.MaxAmountCents))
	}
}

// A client reads only the accounts whose titular it is; an operator every
// account; nobody but an operator an account without a titular.
func TestReaderSees(t *testing.T) {
	t.Parallel()
	ana := ledger.Account{ID: "A", Holder: "ana"}
	orphan := ledger.Account{ID: "B"}
	tests := []struct {
		reader  ledger.Reader
		account ledger.Account
		want    bool
	}{
		{ledger.Reader{Client: "ana"}, ana, true},
		{ledger.Reader{Client: "bruno"}, ana, false},
		{ledger.Reader{Client: "bruno", Operator: true}, ana, true},
		{ledger.Reader{}, orphan, false},
		{ledger.Reader{Client: "ana"}, orphan, false},
		{ledger.Reader{Operator: true}, orphan, true},
	}
	for _, tc := range tests {
		if got := tc.reader.Sees(tc.account); got != tc.want {
			t.Errorf("%+v sees %+v = %v, want %v", tc.reader, tc.account, got, tc.want)
		}
	}
}

func TestDeciderBuildsResultEvents(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	rules := ledger.Rules{Topics: events.Topics{Settled: "settled-topic", Rejected: "rejected-topic"}, Keys: ledgertest.TransferKeys}
	decide := rules.Decider(now)
	tr := signed(ledger.Transfer{ID: uuid.New(), Source: "A", Dest: "B", AmountCents: 10, Currency: "BRL", ClientID: "ana",
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	acct := func(id string, bal int64) *ledger.Account {
		return &ledger.Account{ID: id, Currency: "BRL", BalanceCents: bal, Holder: "ana"}
	}
	tests := []struct {
		name        string
		source      *ledger.Account
		topic, typ  string
		kind        string
		wantPayload string
	}{
		{"settled", acct("A", 10), "settled-topic", events.TypeSettled, ledger.KindSettled,
			`{"eventoId":"%s","transferenciaId":"%s","ocorridoEm":"2026-11-29T22:00:00Z","titularDestino":"bruno"}`},
		{"rejected", acct("A", 9), "rejected-topic", events.TypeRejected, ledger.KindRejected,
			`{"eventoId":"%s","transferenciaId":"%s","motivo":"SALDO_INSUFICIENTE","ocorridoEm":"2026-11-29T22:00:00Z"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dest := acct("B", 0)
			dest.Holder = "bruno" // the settlement names the destination's titular, not the client
			d, err := decide(tc.source, dest, tr)
			if err != nil {
				t.Fatal(err)
			}
			id := events.DerivedID(tc.kind, tr.ID)
			m := d.Event
			got := []string{m.ID.String(), m.Topic, m.Type, m.Key, m.Headers[events.HeaderCorrelationID], m.Headers[events.HeaderTraceparent], string(m.Payload)}
			want := []string{id.String(), tc.topic, tc.typ, "A", tr.ID.String(), tr.Traceparent, fmt.Sprintf(tc.wantPayload, id, tr.ID)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("event mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeciderGivesTheDoubleEntry: a settled transfer's Decision carries the
// debit of the source and the credit of the destination, already applied
// to the two balances it was given (the store writes both as they are); a
// rejected one carries no entry and moves nothing.
func TestDeciderGivesTheDoubleEntry(t *testing.T) {
	t.Parallel()
	decide := ledger.Rules{Keys: ledgertest.TransferKeys}.Decider(time.Now())
	tr := signed(ledger.Transfer{ID: uuid.New(), Source: "A", Dest: "B", AmountCents: 10, Currency: "BRL", ClientID: "ana"})
	tests := []struct {
		name             string
		srcBal           int64
		want             []ledger.Entry
		srcAfter, dstAft int64
	}{
		{"settled", 25, []ledger.Entry{
			{AccountID: "A", Direction: ledger.Debit, AmountCents: 10},
			{AccountID: "B", Direction: ledger.Credit, AmountCents: 10},
		}, 15, 10},
		{"rejected", 9, nil, 9, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &ledger.Account{ID: "A", Currency: "BRL", BalanceCents: tc.srcBal, Holder: "ana"}
			dst := &ledger.Account{ID: "B", Currency: "BRL", Holder: "bruno"}
			d, err := decide(src, dst, tr)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, d.Entries); diff != "" {
				t.Errorf("entries mismatch (-want +got):\n%s", diff)
			}
			if src.BalanceCents != tc.srcAfter || dst.BalanceCents != tc.dstAft {
				t.Errorf("balances after = %d, %d; want %d, %d", src.BalanceCents, dst.BalanceCents, tc.srcAfter, tc.dstAft)
			}
		})
	}
}

// signed is t with ledgertest's authorization of it, as the transfers
// service signs.
func signed(t ledger.Transfer) ledger.Transfer {
	t.Authorization = ledgertest.Authorize(claimOf(t))
	return t
}

func claimOf(t ledger.Transfer) transfersig.Claim {
	return transfersig.Claim{TransferID: t.ID, Source: t.Source, Destination: t.Dest, AmountCents: t.AmountCents,
		Currency: t.Currency, Client: t.ClientID, Hold: t.Hold, ExpiresAt: t.ExpiresAt}
}

// TestProve: a transfer is Signed only when its authorization verifies
// over every field it names, by a key the rules hold; Unchecked with
// ownership off, whatever it carries.
func TestProve(t *testing.T) {
	t.Parallel()
	rules := ledger.Rules{Keys: ledgertest.TransferKeys}
	good := signed(ledger.Transfer{ID: uuid.New(), Source: "A", Dest: "B", AmountCents: 10, Currency: "BRL", ClientID: "ana"})
	stranger, err := transfersig.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	changed := func(f func(t *ledger.Transfer)) ledger.Transfer { c := good; f(&c); return c }
	tests := []struct {
		name  string
		rules ledger.Rules
		t     ledger.Transfer
		want  ledger.Proof
	}{
		{"signed", rules, good, ledger.Signed},
		{"another amount", rules, changed(func(t *ledger.Transfer) { t.AmountCents = 11 }), ledger.Unproven},
		{"another client", rules, changed(func(t *ledger.Transfer) { t.ClientID = "bruno" }), ledger.Unproven},
		{"another source", rules, changed(func(t *ledger.Transfer) { t.Source = "C" }), ledger.Unproven},
		{"another transfer id", rules, changed(func(t *ledger.Transfer) { t.ID = uuid.New() }), ledger.Unproven},
		{"unsigned", rules, changed(func(t *ledger.Transfer) { t.Authorization = nil }), ledger.Unproven},
		{"signed by a key the ledger does not hold", rules,
			changed(func(t *ledger.Transfer) { t.Authorization = stranger.Sign(claimOf(*t)) }), ledger.Unproven},
		{"no keys configured", ledger.Rules{}, good, ledger.Unproven},
		{"ownership off", ledger.Rules{Ownership: ledger.OwnershipOff}, changed(func(t *ledger.Transfer) { t.Authorization = nil }), ledger.Unchecked},
	}
	for _, tc := range tests {
		if got := tc.rules.Prove(tc.t); got != tc.want {
			t.Errorf("%s: Prove = %v, want %v", tc.name, got, tc.want)
		}
	}
}
