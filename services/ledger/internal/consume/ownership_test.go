package consume_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/ledger/internal/ledger"
	"github.com/paysuite/payments/services/ledger/internal/ledgertest"
)

// analysedBy is analysed with clienteId client, signed for client as the
// transfers service signs what a client asks; "" leaves the field out, as
// a producer that predates it would.
func analysedBy(t *testing.T, client string, id uuid.UUID, src, dst string, cents int64) broker.Record {
	t.Helper()
	m := analysed(t, id, src, dst, cents)
	var ev map[string]any
	if err := json.Unmarshal(m.Value, &ev); err != nil {
		t.Fatal(err)
	}
	delete(ev, "clienteId")
	if client != "" {
		ev["clienteId"] = client
	}
	ev["autorizacao"] = ledgertest.Authorize(transfersig.Claim{TransferID: id, Source: src, Destination: dst,
		AmountCents: cents, Currency: "BRL", Client: client})
	var err error
	if m.Value, err = json.Marshal(ev); err != nil {
		t.Fatal(err)
	}
	return m
}

// openFor opens account id of holder with balance cents.
func (e *env) openFor(t *testing.T, holder, id string, balance int64) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := e.store.CreateAccount(ctx, id, "BRL", holder); err != nil {
		t.Fatal(err)
	}
	if balance > 0 {
		if _, _, err := e.store.Deposit(ctx, ledger.DepositRequest{ID: uuid.New(), AccountID: id, AmountCents: balance, ClientID: "operador"}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOnlyTheTitularDebitsAnAccount: through the real consumer and
// PostgreSQL, client B's transfer from client A's account and a record
// naming no client are rejected with ORIGEM_NAO_AUTORIZADA (a result event
// like any other rejection) and move nothing; A's own transfer settles.
func TestOnlyTheTitularDebitsAnAccount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ownership ledger.Ownership
		want      map[string]string // client ("" for none) -> result reason
		balances  map[string]int64
	}{
		{"enforced", ledger.OwnershipEnforced,
			map[string]string{"ana": "", "bruno": ledger.ReasonUnauthorized, "": ledger.ReasonUnauthorized},
			map[string]int64{"ANA-1": 900, "BRUNO-1": 100}},
		{"LEDGER_OWNERSHIP=off", ledger.OwnershipOff,
			map[string]string{"ana": "", "bruno": "", "": ""},
			map[string]int64{"ANA-1": 700, "BRUNO-1": 300}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.ownership = tc.ownership
			e.openFor(t, "ana", "ANA-1", 1_000)
			e.openFor(t, "bruno", "BRUNO-1", 0)
			ids := map[string]uuid.UUID{"bruno": uuid.New(), "": uuid.New(), "ana": uuid.New()}
			e.produce(t,
				analysedBy(t, "bruno", ids["bruno"], "ANA-1", "BRUNO-1", 100),
				analysedBy(t, "", ids[""], "ANA-1", "BRUNO-1", 100),
				analysedBy(t, "ana", ids["ana"], "ANA-1", "BRUNO-1", 100))
			e.run(t, consumer.BlockingRetries, true)
			for client, reason := range tc.want {
				want := "LIQUIDADA"
				if reason != "" {
					want = "REJEITADA"
				}
				e.waitResult(t, ids[client], want)
			}

			st := ledgertest.ReadState(t, e.db)
			got := map[string]string{}
			for client, id := range ids {
				for _, m := range st.Markers {
					if m.TransferID == id {
						got[client] = m.Reason
					}
				}
				// The result event says the same, keyed by the source
				// account, on the topic of its outcome.
				var ev *ledgertest.Event
				for i := range st.Events {
					if st.Events[i].Payload["transferenciaId"] == id.String() {
						ev = &st.Events[i]
					}
				}
				switch {
				case ev == nil:
					t.Errorf("no result event for the transfer of %q", client)
				case tc.want[client] != "" && (ev.Topic != ledgertest.Topics.Rejected || ev.Payload["motivo"] != tc.want[client] || ev.Key != "ANA-1"):
					t.Errorf("result event of %q: %s %v keyed %q, want %s on %s", client, ev.Topic, ev.Payload, ev.Key,
						tc.want[client], ledgertest.Topics.Rejected)
				case tc.want[client] == "" && ev.Topic != ledgertest.Topics.Settled:
					t.Errorf("result event of %q on %s, want %s", client, ev.Topic, ledgertest.Topics.Settled)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reasons by client mismatch (-want +got):\n%s", diff)
			}
			balances := map[string]int64{}
			for _, a := range st.Accounts {
				if !a.Funding {
					balances[a.ID] = a.Balance
				}
			}
			if diff := cmp.Diff(tc.balances, balances); diff != "" {
				t.Errorf("balances mismatch (-want +got):\n%s", diff)
			}
			// The marker records the client each transfer named.
			var recorded int
			if err := e.db.QueryRow(context.Background(),
				`SELECT count(*) FROM processed_transfer WHERE client_id IS NOT DISTINCT FROM NULLIF($1, '') AND transfer_id = $2`,
				"bruno", ids["bruno"]).Scan(&recorded); err != nil || recorded != 1 {
				t.Errorf("processed_transfer of bruno's transfer records client bruno: %d rows, %v", recorded, err)
			}
			ledgertest.CheckInvariants(t, e.db)
		})
	}
}

// TestUnprovenRecordsMoveNothing: through the real consumer and
// PostgreSQL, a record without autorizacao, one signed by a key the ledger
// does not hold and one whose amount was changed after signing are all
// rejected with ORIGEM_NAO_AUTORIZADA, whether or not they name the
// titular and whether or not the source account exists, and move
// nothing; the titular's signed transfer settles.
func TestUnprovenRecordsMoveNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.openFor(t, "ana", "ANA-1", 1_000)
	e.openFor(t, "bruno", "BRUNO-1", 0)
	stranger, err := transfersig.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	// edit rewrites the record's payload.
	edit := func(m broker.Record, f func(ev map[string]any)) broker.Record {
		var ev map[string]any
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		f(ev)
		if m.Value, err = json.Marshal(ev); err != nil {
			t.Fatal(err)
		}
		return m
	}
	ids := map[string]uuid.UUID{}
	for _, name := range []string{"unsigned", "unsigned, unknown account", "another key", "amount changed", "genuine"} {
		ids[name] = uuid.New()
	}
	e.produce(t,
		edit(analysedBy(t, "ana", ids["unsigned"], "ANA-1", "BRUNO-1", 100), func(ev map[string]any) { delete(ev, "autorizacao") }),
		edit(analysedBy(t, "ana", ids["unsigned, unknown account"], "NOBODY-1", "BRUNO-1", 100), func(ev map[string]any) { delete(ev, "autorizacao") }),
		edit(analysedBy(t, "ana", ids["another key"], "ANA-1", "BRUNO-1", 100), func(ev map[string]any) {
			ev["autorizacao"] = stranger.Sign(transfersig.Claim{TransferID: ids["another key"], Source: "ANA-1", Destination: "BRUNO-1",
				AmountCents: 100, Currency: "BRL", Client: "ana"})
		}),
		edit(analysedBy(t, "ana", ids["amount changed"], "ANA-1", "BRUNO-1", 100), func(ev map[string]any) { ev["valorEmCentavos"] = 900 }),
		analysedBy(t, "ana", ids["genuine"], "ANA-1", "BRUNO-1", 100))
	e.run(t, consumer.BlockingRetries, true)
	for _, id := range ids {
		e.waitResult(t, id, map[bool]string{true: "LIQUIDADA", false: "REJEITADA"}[id == ids["genuine"]])
	}
	st := ledgertest.ReadState(t, e.db)
	got := map[string]string{}
	for name, id := range ids {
		for _, m := range st.Markers {
			if m.TransferID == id {
				got[name] = m.Reason
			}
		}
	}
	want := map[string]string{"unsigned": ledger.ReasonUnauthorized, "unsigned, unknown account": ledger.ReasonUnauthorized,
		"another key": ledger.ReasonUnauthorized, "amount changed": ledger.ReasonUnauthorized, "genuine": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasons mismatch (-want +got):\n%s", diff)
	}
	balances := map[string]int64{}
	for _, a := range st.Accounts {
		if !a.Funding {
			balances[a.ID] = a.Balance
		}
	}
	if diff := cmp.Diff(map[string]int64{"ANA-1": 900, "BRUNO-1": 100}, balances); diff != "" {
		t.Errorf("balances mismatch (-want +got):\n%s", diff)
	}
	ledgertest.CheckInvariants(t, e.db)
}
