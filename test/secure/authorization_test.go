package secure_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestForgedTransferRequests runs the four services as their own
// principals under the production ACLs and writes, with the credentials a
// compromised service would hand over, records that ask to debit a victim's
// account: TransferenciaSolicitada records written with the transfers
// service's principal (what its Kafka password, or a row in its outbox
// table, allows), naming the victim's account and its titular as clienteId,
// unsigned or signed by a key the ledger does not trust; and a genuine
// TransferenciaAnalisada replayed with the antifraud principal under a new
// transfer id, with its amount raised or unchanged. Antifraud passes each
// on; the ledger rejects every one with ORIGEM_NAO_AUTORIZADA, the same
// answer for a right and a wrong titular guess, and no balance moves. A
// genuine transfer afterwards settles.
func TestForgedTransferRequests(t *testing.T) {
	s := startSuite(t)
	run := shortID()
	acct := func(name string) string { return "A" + run + "-" + name }
	victim, thief := acct("V"), acct("X")
	balances := map[string]int64{victim: 100_000, thief: 0}
	for id, cents := range balances {
		// Opened with bearer: their titular is secure-client.
		must(t, http.MethodPost, s.ledger.url+"/contas", "", map[string]string{"id": id, "moeda": "BRL"}, nil, http.StatusCreated)
		if cents > 0 {
			mustAs(t, minter, http.MethodPost, s.ledger.url+"/contas/"+url.PathEscape(id)+"/depositos", uuid.NewString(),
				map[string]int64{"valorEmCentavos": cents}, nil, http.StatusCreated)
		}
	}
	const titular = "secure-client"
	tp := events.DefaultTopics

	// A genuine transfer first: its analisada is what the replays copy.
	genuine := s.transfer(t, victim, thief, 1_000)
	if got := s.waitTerminal(t, genuine); got != (outcome{"LIQUIDADA", ""}) {
		t.Fatalf("genuine transfer %s: %+v, want LIQUIDADA", genuine, got)
	}
	balances[victim] -= 1_000
	balances[thief] += 1_000
	var original events.Analysed
	for _, r := range listAs(t, sb.Config(kafkatest.SecuredAdmin), tp.Analysed, victim) {
		var ev events.Analysed
		if err := json.Unmarshal(r.Value, &ev); err == nil && ev.TransferID.String() == genuine {
			original = ev
		}
	}
	if original.Authorization == nil {
		t.Fatalf("no signed analisada of %s on %s", genuine, tp.Analysed)
	}

	stranger, err := transfersig.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	request := func(client string, sign func(transfersig.Claim) *events.Authorization) events.Requested {
		ev := events.Requested{EventID: uuid.New(), TransferID: uuid.New(), SourceAccount: victim, DestAccount: thief,
			AmountCents: 40_000, Currency: "BRL", OccurredAt: time.Now().UTC(), ClientID: client}
		if sign != nil {
			ev.Authorization = sign(transfersig.Claim{TransferID: ev.TransferID, Source: victim, Destination: thief,
				AmountCents: ev.AmountCents, Currency: "BRL", Client: client})
		}
		return ev
	}
	replay := func(amount int64) events.Analysed {
		ev := original
		ev.EventID, ev.TransferID, ev.AmountCents = uuid.New(), uuid.New(), amount
		return ev
	}
	// forgery is one record written by user on topic.
	type forgery struct {
		name, user, topic, typ string
		event                  any
		id                     uuid.UUID
	}
	var cases []forgery
	add := func(name, user, topic, typ string, event any, id uuid.UUID) {
		cases = append(cases, forgery{name, user, topic, typ, event, id})
	}
	for _, c := range []struct {
		name string
		ev   events.Requested
	}{
		{"solicitada naming the titular, unsigned", request(titular, nil)},
		{"solicitada naming the titular, signed by another key", request(titular, stranger.Sign)},
		{"solicitada naming the titular, signed by another key under the trusted kid", request(titular,
			func(c transfersig.Claim) *events.Authorization {
				return &events.Authorization{KeyID: transferKey.KeyID(), Signature: stranger.Sign(c).Signature}
			})},
		{"solicitada with a wrong titular guess, unsigned", request("not-the-titular", nil)},
	} {
		add(c.name, userTransfers, tp.Requested, events.TypeRequested, c.ev, c.ev.TransferID)
	}
	for _, c := range []struct {
		name string
		ev   events.Analysed
	}{
		{"analisada replayed under a new id with a raised amount", replay(50_000)},
		{"analisada replayed under a new id with its amount", replay(original.AmountCents)},
	} {
		add(c.name, userAntifraud, tp.Analysed, events.TypeAnalysed, c.ev, c.ev.TransferID)
	}

	for _, c := range cases {
		value, err := json.Marshal(c.event)
		if err != nil {
			t.Fatal(err)
		}
		m := kafka.Message{Topic: c.topic, Key: []byte(victim), Value: value, Headers: []kafka.Header{
			{Key: events.HeaderEventID, Value: []byte(uuid.NewString())},
			{Key: events.HeaderEventType, Value: []byte(c.typ)},
		}}
		if err := produce(sb.Config(c.user), m); err != nil {
			t.Fatalf("%s: %s writes %s: %v", c.name, c.user, c.topic, err)
		}
	}
	got := map[string]string{}
	for _, c := range cases {
		poll.Until(t, 2*time.Minute, "the ledger decides "+c.name, func() (bool, string) {
			var result string
			var reason *string
			err := s.ledger.db.QueryRow(context.Background(),
				`SELECT result, reason FROM processed_transfer WHERE transfer_id = $1`, c.id).Scan(&result, &reason)
			if errors.Is(err, pgx.ErrNoRows) || result == "EM_PROCESSAMENTO" {
				return false, "not decided yet"
			}
			if err != nil {
				return false, err.Error()
			}
			got[c.name] = result
			if reason != nil {
				got[c.name] += " " + *reason
			}
			return true, ""
		})
	}
	want := map[string]string{}
	for _, c := range cases {
		want[c.name] = "REJEITADA " + events.ReasonUnauthorizedSource
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the ledger's decisions mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(balances, s.balances(t, balances)); diff != "" {
		t.Errorf("balances moved (-want +got):\n%s", diff)
	}

	// The pipeline ran past the forged records: a genuine transfer settles.
	after := s.transfer(t, victim, thief, 100)
	if got := s.waitTerminal(t, after); got != (outcome{"LIQUIDADA", ""}) {
		t.Fatalf("transfer after the attempts: %+v, want LIQUIDADA", got)
	}
	balances[victim] -= 100
	balances[thief] += 100
	if diff := cmp.Diff(balances, s.balances(t, balances)); diff != "" {
		t.Errorf("balances mismatch (-want +got):\n%s", diff)
	}
}
