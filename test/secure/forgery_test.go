package secure_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestForgedDeadLetters runs the four services as their own principals
// under the production ACLs and tries every way a principal that may write
// some DLT, retry topic or result topic could use dead-letter headers to
// move money or change an outcome: each is refused, or lands only on the
// main topic of the DLT it sits on, no other topic grows, and no balance
// moves. Replays go through pkg/dlt with the admin credential (what
// `payments dlt replay` runs) and through the services' ops API.
func TestForgedDeadLetters(t *testing.T) {
	s := startSuite(t)
	tp := events.DefaultTopics
	admin := sb.Config(kafkatest.SecuredAdmin)
	run := shortID()
	acct := func(name string) string { return "F" + run + "-" + name }
	victim, thief := acct("V"), acct("X")
	balances := map[string]int64{victim: 100_000, thief: 0, acct("C"): 1_000, acct("D"): 0}
	for id, cents := range balances {
		must(t, http.MethodPost, s.ledger.url+"/contas", "", map[string]string{"id": id, "moeda": "BRL"}, nil, http.StatusCreated)
		if cents > 0 {
			mustAs(t, minter, http.MethodPost, s.ledger.url+"/contas/"+url.PathEscape(id)+"/depositos", uuid.NewString(),
				map[string]int64{"valorEmCentavos": cents}, nil, http.StatusCreated)
		}
	}
	// A transfer the ledger rejects: a forged settlement must not turn it
	// into LIQUIDADA.
	rejected := s.transfer(t, acct("C"), acct("D"), 5_000)
	if got := s.waitTerminal(t, rejected); got.Status != "REJEITADA" {
		t.Fatalf("transfer %s: %+v, want REJEITADA", rejected, got)
	}
	mains := tp.All()
	offsets := func() map[string]map[int]int64 {
		out := map[string]map[int]int64{}
		for _, topic := range mains {
			out[topic] = endOffsets(t, topic)
		}
		return out
	}
	// checkNothingMoved: no main topic but those in grew (by the given
	// counts), and no balance moved.
	checkNothingMoved := func(t *testing.T, before map[string]map[int]int64, grew map[string]int64) {
		t.Helper()
		after := offsets()
		for _, topic := range mains {
			var n int64
			for p, o := range after[topic] {
				n += o - before[topic][p]
			}
			if n != grew[topic] {
				t.Errorf("%s grew by %d record(s), want %d", topic, n, grew[topic])
			}
		}
		if diff := cmp.Diff(balances, s.balances(t, balances)); diff != "" {
			t.Errorf("balances moved (-want +got):\n%s", diff)
		}
	}
	// replay is `payments dlt replay --key key` as admin.
	replay := func(t *testing.T, dltTopic, key string, opts dlt.Options) (dlt.Plan, int, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		recs, err := dlt.List(ctx, admin, dlt.Filter{Topic: dltTopic, Key: key})
		if err != nil || len(recs) == 0 {
			t.Fatalf("list %s key %s: %d records, %v", dltTopic, key, len(recs), err)
		}
		plan, err := dlt.Prepare(ctx, admin, dltTopic, mains, recs)
		if err != nil {
			return plan, 0, err
		}
		n, err := dlt.Replay(ctx, admin, nil, plan, opts)
		return plan, n, err
	}
	// opsReplay asks a service's ops API to replay every record of key.
	opsReplay := func(t *testing.T, svc *service, dltTopic, key string, unverified bool) (int, string) {
		t.Helper()
		q := url.Values{"topico": {dltTopic}, "chave": {key}}
		if unverified {
			q.Set(opsapi.ParamUnverified, "true")
		}
		status, body, err := call(context.Background(), http.MethodPost, svc.url+opsapi.PathDLTReplay+"?"+q.Encode(), "", nil)
		if err != nil {
			t.Fatalf("POST %s: %v", opsapi.PathDLTReplay, err)
		}
		return status, string(body)
	}
	record := func(topic, key string, event any, eventType string, origin *dlt.Origin) kafka.Message {
		value, err := json.Marshal(event)
		if err != nil {
			t.Fatal(err)
		}
		hs := []broker.Header{{Key: events.HeaderEventID, Value: []byte(uuid.NewString())}, {Key: events.HeaderEventType, Value: []byte(eventType)}}
		if origin != nil {
			hs = dlt.SetFailure(hs, *origin, errors.New("forged failure"))
		}
		return kafkatest.Message(broker.Record{Topic: topic, Key: []byte(key), Value: value, Headers: hs})
	}
	debit := func() events.Analysed {
		return events.Analysed{EventID: uuid.New(), TransferID: uuid.New(), SourceAccount: victim, DestAccount: thief,
			AmountCents: 40_000, Currency: "BRL", OccurredAt: time.Now().UTC(), ClientID: "secure-client"}
	}

	t.Run("an analisada record on the liquidada DLT naming analisada is never replayed", func(t *testing.T) {
		before := offsets()
		dltTopic := events.DLT(tp.Settled)
		// transfers may write liquidada's DLT (its projection dead-letters
		// there).
		if err := produce(sb.Config(userTransfers), record(dltTopic, victim, debit(), events.TypeAnalysed,
			&dlt.Origin{Topic: tp.Analysed, Partition: 0, Offset: 0})); err != nil {
			t.Fatalf("transfers writes %s: %v", dltTopic, err)
		}
		for _, opts := range []dlt.Options{{}, {Unverified: true}} {
			if _, n, err := replay(t, dltTopic, victim, opts); !errors.Is(err, dlt.ErrRefused) || n != 0 {
				t.Errorf("replay(%+v) = %d, %v; want 0, ErrRefused", opts, n, err)
			}
		}
		if st, body := opsReplay(t, s.notifications, dltTopic, victim, true); st != http.StatusConflict || !strings.Contains(body, "replay refused") {
			t.Errorf("ops API replay = %d %s, want 409 replay refused", st, body)
		}
		checkNothingMoved(t, before, nil)
	})

	t.Run("a fake settlement on analisada naming liquidada goes back to analisada only", func(t *testing.T) {
		before := offsets()
		fake := events.Settled{EventID: uuid.New(), TransferID: uuid.MustParse(rejected), OccurredAt: time.Now().UTC()}
		// antifraud may write analisada; the ledger cannot decode a
		// settlement there and dead-letters it.
		m := record(tp.Analysed, victim, fake, events.TypeSettled, &dlt.Origin{Topic: tp.Settled, Partition: 1, Offset: 7})
		m.Headers = append(m.Headers, kafka.Header{Key: "kafka_exception-message", Value: []byte("forged")})
		if err := produce(sb.Config(userAntifraud), m); err != nil {
			t.Fatalf("antifraud writes analisada: %v", err)
		}
		dltTopic := events.DLT(tp.Analysed)
		var dead dlt.Record
		poll.Until(t, time.Minute, "the ledger dead-letters the fake settlement", func() (bool, string) {
			recs, err := dlt.List(context.Background(), admin, dlt.Filter{Topic: dltTopic, Key: victim})
			if err != nil || len(recs) == 0 {
				return false, fmt.Sprintf("%d records, %v", len(recs), err)
			}
			dead = recs[0]
			return true, ""
		})
		var original dlt.Record
		for _, r := range listAs(t, admin, tp.Analysed, victim) {
			original = r
		}
		if want := (dlt.Origin{Topic: tp.Analysed, Partition: original.Partition, Offset: original.Offset}); dead.Origin.Topic != want.Topic ||
			dead.Origin.Partition != want.Partition || dead.Origin.Offset != want.Offset {
			t.Errorf("DLT record origin %+v, want where the ledger read it: %+v", dead.Origin, want)
		}
		if v := (broker.Record{Headers: dead.Headers}).Header("kafka_exception-message"); v != "" {
			t.Errorf("the forged kafka_exception-message %q reached the DLT", v)
		}
		plan, n, err := replay(t, dltTopic, victim, dlt.Options{})
		if err != nil || n != 1 || plan.Target != tp.Analysed {
			t.Fatalf("replay = %+v, %d, %v; want one verified record to %s", plan, n, err, tp.Analysed)
		}
		// The ledger fails the replay again: back on its DLT, marked.
		poll.Until(t, time.Minute, "the replay dead-lettered again", func() (bool, string) {
			recs, err := dlt.List(context.Background(), admin, dlt.Filter{Topic: dltTopic, Key: victim})
			return err == nil && len(recs) == 2 && recs[1].ReplayedAt != "", fmt.Sprintf("%d records, %v", len(recs), err)
		})
		checkNothingMoved(t, before, map[string]int64{tp.Analysed: 2})
		if got := s.waitTerminal(t, rejected); got.Status != "REJEITADA" {
			t.Errorf("transfer %s: %+v, want still REJEITADA", rejected, got)
		}
	})

	t.Run("notifications decide by the topic, not by a header", func(t *testing.T) {
		before := offsets()
		type forged struct {
			user, topic string
			id, tr      uuid.UUID
		}
		// Each record bears the event id derived for its transfer
		// (notifications refuse any other, events.CheckResultID).
		trA, trB := uuid.New(), uuid.New()
		cases := []forged{
			// the ledger may write rejeitada; its header claims liquidada
			{userLedger, tp.Rejected, events.DerivedID(events.KindRejectedLedger, trA), trA},
			// notifications may write its retry topics
			{userNotifications, broker.RetryTopic(tp.Rejected, broker.RetryDelays[0]), events.DerivedID(events.KindRejectedLedger, trB), trB},
		}
		for _, c := range cases {
			e := events.Rejected{EventID: c.id, TransferID: c.tr, Reason: events.ReasonInsufficientFunds, OccurredAt: time.Now().UTC()}
			m := record(c.topic, victim, e, events.TypeRejected, &dlt.Origin{Topic: tp.Settled})
			m.Headers[0].Value = []byte(c.id.String())
			if err := produce(sb.Config(c.user), m); err != nil {
				t.Fatalf("%s writes %s: %v", c.user, c.topic, err)
			}
		}
		for _, c := range cases {
			poll.Until(t, time.Minute, "notified "+c.id.String(), func() (bool, string) {
				var eventType string
				err := s.notifications.db.QueryRow(context.Background(),
					`SELECT event_type FROM notification WHERE event_id = $1`, c.id).Scan(&eventType)
				if err != nil {
					return false, err.Error()
				}
				if eventType != events.TypeRejected {
					t.Errorf("record on %s notified as %s, want %s", c.topic, eventType, events.TypeRejected)
				}
				return true, ""
			})
		}
		checkNothingMoved(t, before, map[string]int64{tp.Rejected: 1})
	})

	t.Run("a settlement forged onto the liquidada DLT is refused unless forced", func(t *testing.T) {
		before := offsets()
		dltTopic := events.DLT(tp.Settled)
		forgedKey := acct("C")
		fake := events.Settled{EventID: uuid.New(), TransferID: uuid.MustParse(rejected), OccurredAt: time.Now().UTC()}
		// notifications may write liquidada's DLT too; the header names
		// liquidada itself, at an offset that holds something else or
		// nothing.
		if err := produce(sb.Config(userNotifications), record(dltTopic, forgedKey, fake, events.TypeSettled,
			&dlt.Origin{Topic: tp.Settled, Partition: 0, Offset: 0})); err != nil {
			t.Fatalf("notifications writes %s: %v", dltTopic, err)
		}
		plan, n, err := replay(t, dltTopic, forgedKey, dlt.Options{})
		if !errors.Is(err, dlt.ErrUnverified) || n != 0 || plan.Target != tp.Settled || plan.Unverified() != 1 {
			t.Errorf("replay = %+v, %d, %v; want 0, ErrUnverified, one unverified record for %s", plan, n, err, tp.Settled)
		}
		st, body := opsReplay(t, s.notifications, dltTopic, forgedKey, false)
		if st != http.StatusConflict || !strings.Contains(body, opsapi.ParamUnverified) {
			t.Errorf("ops API replay = %d %s, want 409 naming %s", st, body, opsapi.ParamUnverified)
		}
		if logs := s.notifications.logs.String(); !strings.Contains(logs, "audit.action=dlt.replay") ||
			!strings.Contains(logs, "audit.target="+tp.Settled) || !strings.Contains(logs, "audit.refused=unverified") {
			t.Errorf("no audit line of the refused replay with its target in the notifications log:\n%s", logs)
		}
		checkNothingMoved(t, before, nil)
		if got := s.waitTerminal(t, rejected); got.Status != "REJEITADA" {
			t.Errorf("transfer %s: %+v, want still REJEITADA", rejected, got)
		}

		// Forced by the operator: to liquidada and nowhere else, marked.
		// (A settlement of a transfer no one requested: nothing to move.)
		otherKey := acct("Z")
		strayID := uuid.New()
		stray := events.Settled{EventID: events.DerivedID(events.KindSettled, strayID), TransferID: strayID, OccurredAt: time.Now().UTC()}
		if err := produce(sb.Config(userNotifications), record(dltTopic, otherKey, stray, events.TypeSettled,
			&dlt.Origin{Topic: tp.Settled, Partition: 0, Offset: 0})); err != nil {
			t.Fatalf("notifications writes %s: %v", dltTopic, err)
		}
		before = offsets()
		if _, n, err := replay(t, dltTopic, otherKey, dlt.Options{Unverified: true}); err != nil || n != 1 {
			t.Fatalf("forced replay = %d, %v; want 1, nil", n, err)
		}
		landed := listAs(t, admin, tp.Settled, otherKey)
		if len(landed) != 1 || (broker.Record{Headers: landed[0].Headers}).Header(dlt.HeaderUnverified) == "" {
			t.Errorf("liquidada holds %d records of %s, want 1 marked %s", len(landed), otherKey, dlt.HeaderUnverified)
		}
		checkNothingMoved(t, before, map[string]int64{tp.Settled: 1})
	})

	t.Run("notifications list their DLTs under the production ACLs", func(t *testing.T) {
		for _, svc := range []*service{s.notifications, s.ledger} {
			var got opsapi.DLTs
			must(t, http.MethodGet, svc.url+opsapi.PathDLT, "", nil, &got, http.StatusOK)
			var names []string
			for _, d := range got.Topicos {
				names = append(names, d.Topico)
			}
			want := []string{events.DLT(tp.Analysed), events.DLT(tp.CaptureRequested), events.DLT(tp.CancelRequested), events.DLT(tp.RefundRequested)}
			if svc == s.notifications {
				want = []string{events.DLT(tp.Settled), events.DLT(tp.Rejected), events.DLT(tp.Reserved), events.DLT(tp.Cancelled),
					events.DLT(tp.RefundSettled), events.DLT(tp.RefundRejected)}
			}
			if !slices.Equal(names, want) {
				t.Errorf("%s lists %v, want %v", svc.name, names, want)
			}
		}
	})
}

// listAs lists the records of key on topic with cfg's credential.
func listAs(tb testing.TB, cfg broker.Config, topic, key string) []dlt.Record {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := dlt.List(ctx, cfg, dlt.Filter{Topic: topic, Key: key})
	if err != nil {
		tb.Fatalf("list %s key %s: %v", topic, key, err)
	}
	return recs
}
