package notifications_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/services/notifications/webhook"
	"github.com/paysuite/payments/test/support/poll"
)

// A result event produces one signed webhook, at the account's URL or the
// default one, whose signature verifies with the shared secret; a tampered
// body or an old timestamp fails verification.
func TestSignedWebhook(t *testing.T) {
	t.Parallel()
	h := start(t, options{urls: map[string]string{"CC-ROUTED": "/routed"}})

	tests := []struct {
		name  string
		event event
		path  string
		want  webhook.Payload
	}{
		{name: "settled, default URL", event: h.settled("CC-001"), path: "/hook",
			want: webhook.Payload{Type: events.TypeSettled, Status: "LIQUIDADA"}},
		{name: "rejected, account URL", event: h.rejected("CC-ROUTED", events.ReasonInsufficientFunds), path: "/routed",
			want: webhook.Payload{Type: events.TypeRejected, Status: "REJEITADA", Reason: events.ReasonInsufficientFunds}},
		{name: "rejected, not the titular of the source", event: h.rejected("CC-ALHEIA", events.ReasonUnauthorizedSource), path: "/hook",
			want: webhook.Payload{Type: events.TypeRejected, Status: "REJEITADA", Reason: events.ReasonUnauthorizedSource}},
		{name: "hold reserved", event: h.reserved("CC-HOLD", 12345), path: "/hook",
			want: webhook.Payload{Type: events.TypeReserved, Status: "RESERVADA", AmountCents: 12345}},
		{name: "hold captured in part", event: captured(h.settled("CC-HOLD"), 4000), path: "/hook",
			want: webhook.Payload{Type: events.TypeSettled, Status: "LIQUIDADA", AmountCents: 4000}},
		{name: "hold cancelled, account URL", event: h.cancelled("CC-ROUTED", events.ReasonCancelledByClient), path: "/routed",
			want: webhook.Payload{Type: events.TypeCancelled, Status: "CANCELADA", Reason: events.ReasonCancelledByClient}},
		{name: "hold expired", event: h.cancelled("CC-HOLD", events.ReasonExpired), path: "/hook",
			want: webhook.Payload{Type: events.TypeCancelled, Status: "EXPIRADA", Reason: events.ReasonExpired}},
		{name: "refund settled", event: h.refundSettled("CC-REFUND", 2500), path: "/hook",
			want: webhook.Payload{Type: events.TypeRefundSettled, Status: "LIQUIDADO", AmountCents: 2500}},
		{name: "refund rejected for exceeding, account URL", event: h.refundRejected("CC-ROUTED", events.ReasonExceedsRefundable), path: "/routed",
			want: webhook.Payload{Type: events.TypeRefundRejected, Status: "REJEITADO", Reason: events.ReasonExceedsRefundable}},
	}
	for _, tt := range tests {
		h.publish(tt.event)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.event
			req := h.waitRequests(e.ID.String(), 1, 30*time.Second)[0]
			if req.Path != tt.path {
				t.Errorf("webhook path = %q, want %q", req.Path, tt.path)
			}
			if ct := req.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if got := req.Header.Get(webhook.HeaderEventID); got != e.ID.String() {
				t.Errorf("%s = %q, want %s", webhook.HeaderEventID, got, e.ID)
			}
			var got webhook.Payload
			if err := json.Unmarshal(req.Body, &got); err != nil {
				t.Fatalf("decode body: %v", err)
			}
			want := tt.want
			want.EventID, want.TransferID, want.OccurredAt, want.ExpiresAt = e.ID.String(), e.TransferID.String(), e.OccurredAt, e.ExpiresAt
			if e.RefundID != uuid.Nil {
				want.RefundID = e.RefundID.String()
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("payload mismatch (-want +got):\n%s", diff)
			}

			sig := req.Header.Get(webhook.HeaderSignature)
			secret, otherDestination := []byte(testSecret), []byte(routedSecret(e.Key))
			if tt.path != "/hook" {
				secret, otherDestination = otherDestination, secret
			}
			if err := webhook.Verify(otherDestination, sig, req.Body, req.At, webhook.DefaultTolerance); !errors.Is(err, webhook.ErrSignatureMismatch) {
				t.Errorf("Verify(another destination's secret) = %v, want ErrSignatureMismatch", err)
			}
			if err := webhook.Verify(secret, sig, req.Body, req.At, webhook.DefaultTolerance); err != nil {
				t.Errorf("Verify(received) = %v, want nil", err)
			}
			tampered := []byte(strings.Replace(string(req.Body), e.TransferID.String(), "00000000-0000-0000-0000-000000000000", 1))
			if err := webhook.Verify(secret, sig, tampered, req.At, webhook.DefaultTolerance); !errors.Is(err, webhook.ErrSignatureMismatch) {
				t.Errorf("Verify(tampered body) = %v, want ErrSignatureMismatch", err)
			}
			later := req.At.Add(webhook.DefaultTolerance + time.Minute)
			if err := webhook.Verify(secret, sig, req.Body, later, webhook.DefaultTolerance); !errors.Is(err, webhook.ErrTimestampOutOfTolerance) {
				t.Errorf("Verify(old timestamp) = %v, want ErrTimestampOutOfTolerance", err)
			}
			if err := webhook.Verify([]byte("some-other-secret-entirely"), sig, req.Body, req.At, 0); !errors.Is(err, webhook.ErrSignatureMismatch) {
				t.Errorf("Verify(other secret) = %v, want ErrSignatureMismatch", err)
			}

			entry := h.waitLog(e.ID, "delivered", func(l logEntry) bool { return l.Status == "DELIVERED" })
			if diff := cmp.Diff(logEntry{Status: "DELIVERED", Attempts: 1, Channel: "webhook", Delivered: true}, entry); diff != "" {
				t.Errorf("log entry mismatch (-want +got):\n%s", diff)
			}
			// Exactly one: a later record of the same partition was handled,
			// and still only one webhook arrived for e.
			h.barrier(e.Topic, e.Key)
			if n := len(h.recv.of(e.ID.String())); n != 1 {
				t.Errorf("got %d webhooks for %s, want exactly 1", n, e.ID)
			}
		})
	}
}

// captured is e, a settlement, as a hold's capture of cents.
func captured(e event, cents int64) event {
	e.AmountCents = cents
	return e
}

// A hold's results go through the same retry topics and DLT as the other
// results: a reservation whose receiver fails twice is delivered from
// reservada's retry-2000 topic, once; a cancellation whose receiver always
// fails lands on cancelada's DLT after 4 attempts.
func TestHoldResultsRetryTopics(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	reserved := h.reserved("CC-HOLD-RETRY", 500)
	cancelled := h.cancelled("CC-HOLD-RETRY", events.ReasonExpired)
	h.recv.setRespond(func(id string, previous int) int {
		if id == cancelled.ID.String() || id == reserved.ID.String() && previous < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	h.publish(reserved)
	h.publish(cancelled)

	h.waitRequests(reserved.ID.String(), 3, 30*time.Second)
	entry := h.waitLog(reserved.ID, "delivered", func(l logEntry) bool { return l.Status == "DELIVERED" })
	if diff := cmp.Diff(logEntry{Status: "DELIVERED", Attempts: 3, Channel: "webhook", Delivered: true}, entry); diff != "" {
		t.Errorf("reservation's log entry mismatch (-want +got):\n%s", diff)
	}
	for _, d := range []time.Duration{time.Second, 2 * time.Second} {
		topic := broker.RetryTopic(h.topics.Reserved, d)
		if recs := h.list(topic); len(recs) != 1 {
			t.Errorf("%s holds %d records, want 1", topic, len(recs))
		}
	}

	recs := h.waitDLT(h.topics.Cancelled, 1, 40*time.Second)
	if len(recs) != 1 {
		t.Fatalf("cancelada's DLT holds %d records, want 1", len(recs))
	}
	if got := string(recs[0].Key); got != cancelled.Key {
		t.Errorf("DLT record key = %q, want %q", got, cancelled.Key)
	}
	if orig, err := header(recs[0], dlt.HeaderDLTOriginalTopic); err != nil || orig != h.topics.Cancelled {
		t.Errorf("%s = %q (%v), want %s", dlt.HeaderDLTOriginalTopic, orig, err, h.topics.Cancelled)
	}
	if n := len(h.recv.of(cancelled.ID.String())); n != 4 {
		t.Errorf("receiver saw %d attempts of the cancellation, want 4", n)
	}
	h.barrier(h.topics.Reserved, reserved.Key)
	if n := len(h.recv.of(reserved.ID.String())); n != 3 {
		t.Errorf("got %d webhooks for the reservation, want 3 (two failures, one success)", n)
	}
	if recs := h.list(events.DLT(h.topics.Reserved)); len(recs) != 0 {
		t.Errorf("reservada's DLT holds %d records, want 0", len(recs))
	}
}

// A refund's results go through the same retry topics and DLT as the
// other results: a settled refund whose receiver fails once is delivered
// from estorno.liquidado's retry-1000 topic, once; a rejected refund whose
// receiver always fails lands on estorno.rejeitado's DLT after 4
// attempts, with its key and original topic.
func TestRefundResultsRetryTopics(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	settled := h.refundSettled("CC-REFUND-RETRY", 700)
	rejected := h.refundRejected("CC-REFUND-RETRY", events.ReasonInsufficientFunds)
	h.recv.setRespond(func(id string, previous int) int {
		if id == rejected.ID.String() || id == settled.ID.String() && previous < 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	h.publish(settled)
	h.publish(rejected)

	h.waitRequests(settled.ID.String(), 2, 30*time.Second)
	entry := h.waitLog(settled.ID, "delivered", func(l logEntry) bool { return l.Status == "DELIVERED" })
	if diff := cmp.Diff(logEntry{Status: "DELIVERED", Attempts: 2, Channel: "webhook", Delivered: true}, entry); diff != "" {
		t.Errorf("settled refund's log entry mismatch (-want +got):\n%s", diff)
	}
	if recs := h.list(broker.RetryTopic(h.topics.RefundSettled, time.Second)); len(recs) != 1 {
		t.Errorf("estorno.liquidado's retry-1000 holds %d records, want 1", len(recs))
	}

	recs := h.waitDLT(h.topics.RefundRejected, 1, 40*time.Second)
	if len(recs) != 1 {
		t.Fatalf("estorno.rejeitado's DLT holds %d records, want 1", len(recs))
	}
	if got := string(recs[0].Key); got != rejected.Key {
		t.Errorf("DLT record key = %q, want %q", got, rejected.Key)
	}
	if orig, err := header(recs[0], dlt.HeaderDLTOriginalTopic); err != nil || orig != h.topics.RefundRejected {
		t.Errorf("%s = %q (%v), want %s", dlt.HeaderDLTOriginalTopic, orig, err, h.topics.RefundRejected)
	}
	if n := len(h.recv.of(rejected.ID.String())); n != 4 {
		t.Errorf("receiver saw %d attempts of the rejected refund, want 4", n)
	}
	for _, d := range broker.RetryDelays {
		if recs := h.list(broker.RetryTopic(h.topics.RefundRejected, d)); len(recs) != 1 {
			t.Errorf("estorno.rejeitado's retry topic of %s holds %d records, want 1", d, len(recs))
		}
	}
	h.barrier(h.topics.RefundSettled, settled.Key)
	if n := len(h.recv.of(settled.ID.String())); n != 2 {
		t.Errorf("got %d webhooks for the settled refund, want 2 (one failure, one success)", n)
	}
	if recs := h.list(events.DLT(h.topics.RefundSettled)); len(recs) != 0 {
		t.Errorf("estorno.liquidado's DLT holds %d records, want 0", len(recs))
	}
}

// A receiver failing twice then succeeding gets the webhook again after
// about 1 s and then 2 s (retry topics), once more only, and nothing lands
// on the DLT.
func TestRetryTopicsThenSuccess(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	e := h.settled("CC-RETRY")
	h.recv.setRespond(func(id string, previous int) int {
		if id == e.ID.String() && previous < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	h.publish(e)

	reqs := h.waitRequests(e.ID.String(), 3, 30*time.Second)
	h.waitLog(e.ID, "delivered", func(l logEntry) bool { return l.Status == "DELIVERED" })
	gotStatus := []int{reqs[0].Status, reqs[1].Status, reqs[2].Status}
	if diff := cmp.Diff([]int{503, 503, 200}, gotStatus); diff != "" {
		t.Errorf("answers mismatch (-want +got):\n%s", diff)
	}

	// The retry records say when they are due; the receiver saw each
	// attempt no earlier than that, and about 1 s then 2 s after the
	// previous one.
	retries := []struct {
		delay    time.Duration
		attempts int
	}{{time.Second, 2}, {2 * time.Second, 3}}
	const slack = 1500 * time.Millisecond
	for i, r := range retries {
		topic := broker.RetryTopic(h.topics.Settled, r.delay)
		recs := h.list(topic)
		if len(recs) != 1 {
			t.Fatalf("%s holds %d records, want 1", topic, len(recs))
		}
		rec := recs[0]
		msg := toRecord(rec)
		due := dlt.DueAt(msg)
		// The record is stamped when the producer encodes it, a little
		// after the due time was computed.
		if d := due.Sub(rec.Time); d < r.delay-250*time.Millisecond || d > r.delay+5*time.Millisecond {
			t.Errorf("%s: due %s after it was written, want about %s", topic, d, r.delay)
		}
		if earliest := reqs[i].At.Add(r.delay - time.Millisecond); due.Before(earliest) {
			t.Errorf("%s: due at %s, less than %s after the failed attempt at %s", topic,
				due.Format(time.StampMilli), r.delay, reqs[i].At.Format(time.StampMilli))
		}
		if got := dlt.Attempts(msg); got != r.attempts {
			t.Errorf("%s: attempts header = %d, want %d", topic, got, r.attempts)
		}
		arrival := reqs[i+1].At
		if arrival.Before(due) {
			t.Errorf("attempt %d arrived at %s, before it was due at %s", i+2, arrival.Format(time.StampMilli), due.Format(time.StampMilli))
		}
		t.Logf("attempt %d: %s after attempt %d, %s after due", i+2, arrival.Sub(reqs[i].At), i+1, arrival.Sub(due))
		if gap := arrival.Sub(reqs[i].At); gap < r.delay-5*time.Millisecond || gap > r.delay+slack {
			t.Errorf("attempt %d came %s after attempt %d, want about %s", i+2, gap, i+1, r.delay)
		}
	}

	h.barrier(h.topics.Settled, e.Key)
	if n := len(h.recv.of(e.ID.String())); n != 3 {
		t.Errorf("got %d webhooks for %s, want 3 (two failures, one success)", n, e.ID)
	}
	if recs := h.list(broker.RetryTopic(h.topics.Settled, 4*time.Second)); len(recs) != 0 {
		t.Errorf("retry-4000 holds %d records, want 0", len(recs))
	}
	if recs := h.list(events.DLT(h.topics.Settled)); len(recs) != 0 {
		t.Errorf("DLT holds %d records, want 0", len(recs))
	}
	entry, err := h.logEntry(e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(logEntry{Status: "DELIVERED", Attempts: 3, Channel: "webhook", Delivered: true}, entry); diff != "" {
		t.Errorf("log entry mismatch (-want +got):\n%s", diff)
	}

	// Each attempt is recorded with the topic it was read from.
	rows, err := h.pool.Query(t.Context(), `
SELECT attempt, topic, outcome, error IS NOT NULL FROM notification_attempt WHERE event_id = $1 ORDER BY attempt`, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	type attemptRow struct {
		Attempt        int
		Topic, Outcome string
		HasError       bool
	}
	var gotAttempts []attemptRow
	for rows.Next() {
		var a attemptRow
		if err := rows.Scan(&a.Attempt, &a.Topic, &a.Outcome, &a.HasError); err != nil {
			t.Fatal(err)
		}
		gotAttempts = append(gotAttempts, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantAttempts := []attemptRow{
		{1, h.topics.Settled, "FAILED", true},
		{2, broker.RetryTopic(h.topics.Settled, time.Second), "FAILED", true},
		{3, broker.RetryTopic(h.topics.Settled, 2*time.Second), "DELIVERED", false},
	}
	if diff := cmp.Diff(wantAttempts, gotAttempts); diff != "" {
		t.Errorf("attempts mismatch (-want +got):\n%s", diff)
	}
}

// A receiver always failing: after 4 attempts the record is on the DLT with
// its original headers and the DLT headers, and a later record of the same
// partition was notified meanwhile.
func TestAlwaysFailingGoesToDLTWithoutBlocking(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	failing := h.rejected("CC-DOWN", events.ReasonBlockedByAntifraud)
	next := h.rejected("CC-DOWN", events.ReasonInsufficientFunds)
	h.recv.setRespond(func(id string, _ int) int {
		if id == failing.ID.String() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	h.publish(failing)
	h.publish(next)

	recs := h.waitDLT(h.topics.Rejected, 1, 40*time.Second)
	if len(recs) != 1 {
		t.Fatalf("DLT holds %d records, want 1", len(recs))
	}
	attempts := h.recv.of(failing.ID.String())
	if len(attempts) != 4 {
		t.Fatalf("receiver saw %d attempts, want 4", len(attempts))
	}
	nextReqs := h.recv.of(next.ID.String())
	if len(nextReqs) != 1 {
		t.Fatalf("the next record got %d webhooks, want 1", len(nextReqs))
	}
	if !nextReqs[0].At.Before(attempts[1].At) {
		t.Errorf("the next record was notified at %s, after the failing one's second attempt at %s: the partition was blocked",
			nextReqs[0].At.Format(time.StampMilli), attempts[1].At.Format(time.StampMilli))
	}

	// Where the failing record sat on the main topic.
	var original dlt.Record
	for _, r := range h.list(h.topics.Rejected) {
		if r.EventID == failing.ID.String() {
			original = r
		}
	}
	if original.Topic == "" {
		t.Fatalf("failing record not found on %s", h.topics.Rejected)
	}
	got := recs[0]
	want := dlt.Record{
		Topic:     events.DLT(h.topics.Rejected),
		Key:       []byte(failing.Key),
		Value:     failing.payload(),
		Origin:    dlt.Origin{Topic: h.topics.Rejected, Partition: original.Partition, Offset: original.Offset, Timestamp: original.Time, Group: h.cfg.Group},
		Attempts:  4,
		EventID:   failing.ID.String(),
		EventType: events.TypeRejected, CorrelationID: failing.TransferID.String(),
		ExceptionType: "*channels.StatusError", ExceptionMessage: "notify event " + failing.ID.String() + ": webhook answered HTTP 500",
	}
	ignore := cmpopts.IgnoreFields(dlt.Record{}, "Partition", "Offset", "Time", "Headers")
	if diff := cmp.Diff(want, got, ignore, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("DLT record mismatch (-want +got):\n%s", diff)
	}
	for k, v := range failing.Headers {
		if got, err := header(got, k); err != nil || got != v {
			t.Errorf("DLT header %s = %q (%v), want %q", k, got, err, v)
		}
	}
	for _, k := range []string{dlt.HeaderDLTOriginalTopic, dlt.HeaderDLTOriginalPartition, dlt.HeaderDLTOriginalOffset,
		dlt.HeaderDLTOriginalTimestamp, dlt.HeaderDLTOriginalGroup, dlt.HeaderDLTExceptionFQCN, dlt.HeaderDLTExceptionMessage} {
		if _, err := header(got, k); err != nil {
			t.Errorf("DLT record: %v", err)
		}
	}

	entry, err := h.logEntry(failing.ID)
	if err != nil {
		t.Fatal(err)
	}
	if entry.Status != "FAILED" || entry.Attempts != 4 || entry.Delivered || !strings.Contains(entry.LastError, "HTTP 500") {
		t.Errorf("log entry = %+v, want FAILED after 4 attempts with the HTTP 500", entry)
	}
}

// A destination URL's query (where receivers put tokens) never reaches
// the delivery log, the logs or the DLT record's headers: the transport
// error that quotes the URL names it without query or user info.
func TestDLTHidesTheURLsQuery(t *testing.T) {
	t.Parallel()
	const token = "url-token-s3cr3t"
	h := start(t, options{urls: map[string]string{"CC-TOKEN": "/hook/token?token=" + token}})
	failing := h.rejected("CC-TOKEN", events.ReasonBlockedByAntifraud)
	h.recv.setRespond(func(string, int) int { return hangUp })
	h.publish(failing)

	recs := h.waitDLT(h.topics.Rejected, 1, 40*time.Second)
	if len(recs) != 1 {
		t.Fatalf("DLT holds %d records, want 1", len(recs))
	}
	got := recs[0]
	if !strings.Contains(got.ExceptionMessage, h.recv.srv.URL+"/hook/token") {
		t.Errorf("DLT exception message %q does not name the destination", got.ExceptionMessage)
	}
	for _, hd := range got.Headers {
		if strings.Contains(string(hd.Value), token) {
			t.Errorf("DLT header %s shows the URL's query: %s", hd.Key, hd.Value)
		}
	}
	entry, err := h.logEntry(failing.ID)
	if err != nil {
		t.Fatal(err)
	}
	if entry.LastError == "" || strings.Contains(entry.LastError, token) {
		t.Errorf("delivery log error %q: want the failure without the URL's query", entry.LastError)
	}
}

// An undecodable record goes to the DLT at once: no retry topic, no
// webhook.
func TestUndecodableRecordToDLTAtOnce(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	tests := []struct {
		name    string
		topic   string
		value   string
		message string
	}{
		{name: "not JSON", topic: h.topics.Rejected, value: `{"eventoId": `, message: "malformed event"},
		{name: "missing motivo", topic: h.topics.Rejected, message: `missing required field "motivo"`,
			value: `{"eventoId":"0b9c6c1e-52d9-4c63-a0ab-5f7d0e4f8a10","transferenciaId":"4c1f5f0e-8f3e-4bde-a5ad-0d2f4b1f9a21","ocorridoEm":"2026-11-29T22:00:00Z"}`},
		{name: "wrong type", topic: h.topics.Settled, message: "malformed event",
			value: `{"eventoId":42,"transferenciaId":"4c1f5f0e-8f3e-4bde-a5ad-0d2f4b1f9a21","ocorridoEm":"2026-11-29T22:00:00Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "CC-POISON-" + strings.ReplaceAll(tt.name, " ", "-")
			h.publishRaw(tt.topic, key, []byte(tt.value), map[string]string{events.HeaderEventID: "poison-" + tt.name})
			var rec dlt.Record
			poll.Until(t, 30*time.Second, "poison record on the DLT", func() (bool, string) {
				for _, r := range h.list(events.DLT(tt.topic)) {
					if string(r.Key) == key {
						rec = r
						return true, ""
					}
				}
				return false, "not there"
			})
			if rec.Attempts != 1 || !strings.Contains(rec.ExceptionMessage, tt.message) || rec.Origin.Topic != tt.topic {
				t.Errorf("DLT record: attempts %d, origin %q, exception %q; want 1 attempt from %s and %q",
					rec.Attempts, rec.Origin.Topic, rec.ExceptionMessage, tt.topic, tt.message)
			}
			for _, r := range h.list(broker.RetryTopic(tt.topic, time.Second)) {
				if string(r.Key) == key {
					t.Errorf("poison record went to a retry topic")
				}
			}
			h.barrier(tt.topic, key)
			for _, q := range h.recv.all() {
				if strings.HasPrefix(q.EventID, "poison") || strings.Contains(string(q.Body), "0b9c6c1e") {
					t.Errorf("receiver was called for the poison record: %s", q.Body)
				}
			}
		})
	}
}

// The same event delivered twice gives one notification.
func TestDuplicateDeliveryNotifiesOnce(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	e := h.settled("CC-DUP")
	h.publish(e)
	h.publish(e)
	h.barrier(e.Topic, e.Key)
	if n := len(h.recv.of(e.ID.String())); n != 1 {
		t.Errorf("got %d webhooks for an event delivered twice, want 1", n)
	}
	if recs := h.list(e.Topic); len(recs) != 3 {
		t.Fatalf("main topic holds %d records, want 3 (the event twice and the barrier)", len(recs))
	}
}

// A record replayed from the DLT after the receiver recovered is notified
// once; replaying it again notifies nothing more.
func TestReplayFromDLT(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	e := h.settled("CC-REPLAY")
	h.recv.setRespond(func(id string, _ int) int {
		if id == e.ID.String() {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	h.publish(e)
	h.waitDLT(h.topics.Settled, 1, 40*time.Second)
	if n := len(h.recv.of(e.ID.String())); n != 4 {
		t.Fatalf("receiver saw %d attempts before the DLT, want 4", n)
	}

	h.recv.setRespond(func(string, int) int { return http.StatusOK }) // recovered
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := dlt.List(ctx, h.brokers, dlt.Filter{Topic: events.DLT(h.topics.Settled), Key: e.Key})
	if err != nil || len(recs) != 1 {
		t.Fatalf("List = %d records, %v; want 1", len(recs), err)
	}
	// It failed there for real: its original is where its headers say.
	plan, err := dlt.Prepare(ctx, h.brokers, events.DLT(h.topics.Settled), h.topics.All(), recs)
	if err != nil || plan.Target != h.topics.Settled || plan.Unverified() != 0 {
		t.Fatalf("Prepare = %+v, %v; want a verified replay to %s", plan, err, h.topics.Settled)
	}
	if n, err := dlt.Replay(ctx, h.brokers, nil, plan, dlt.Options{Rate: 10}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v; want 1, nil", n, err)
	}
	reqs := h.waitRequests(e.ID.String(), 5, 30*time.Second)
	if reqs[4].Status != http.StatusOK {
		t.Errorf("replayed webhook answered %d, want 200", reqs[4].Status)
	}
	entry := h.waitLog(e.ID, "delivered", func(l logEntry) bool { return l.Status == "DELIVERED" })
	if entry.Attempts != 5 {
		t.Errorf("log entry attempts = %d, want 5", entry.Attempts)
	}

	// The replayed record on the main topic: original headers, the replay
	// marker, none of the dead-letter bookkeeping.
	var replayed []dlt.Record
	for _, r := range h.list(h.topics.Settled) {
		if r.ReplayedAt != "" {
			replayed = append(replayed, r)
		}
	}
	if len(replayed) != 1 {
		t.Fatalf("main topic holds %d replayed records, want 1", len(replayed))
	}
	var keys []string
	for _, hd := range replayed[0].Headers {
		keys = append(keys, hd.Key)
	}
	wantKeys := []string{events.HeaderCorrelationID, dlt.HeaderReplayed, events.HeaderEventID, events.HeaderEventType, events.HeaderTraceparent}
	if diff := cmp.Diff(wantKeys, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("replayed record headers mismatch (-want +got):\n%s", diff)
	}

	// Replaying again sends nothing: the event is in the log as delivered.
	if n, err := dlt.Replay(ctx, h.brokers, nil, plan, dlt.Options{Rate: 10}); err != nil || n != 1 {
		t.Fatalf("second Replay = %d, %v; want 1, nil", n, err)
	}
	h.barrier(h.topics.Settled, e.Key)
	if n := len(h.recv.of(e.ID.String())); n != 5 {
		t.Errorf("receiver saw %d requests for the event after a second replay, want still 5", n)
	}
}

func TestConfigFromEnv(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://localhost/db"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    func(notifications.Config) string // "" when fine
		wantErr string
	}{
		{name: "defaults", env: with(), want: func(c notifications.Config) string {
			if c.HTTPAddr != ":8083" || c.Channel != "log" || c.Group != "notificacoes" || c.Webhook.Timeout != 5*time.Second ||
				c.Topics != events.DefaultTopics {
				return "unexpected defaults"
			}
			return ""
		}},
		{name: "webhook", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_SECRET", testSecret, "WEBHOOK_DEFAULT_URL", "https://hooks.example/x",
			"WEBHOOK_DESTINATIONS", "ACME, GLOBEX", "WEBHOOK_ACME_URL", "https://a.example/h", "WEBHOOK_ACME_ACCOUNTS", "CC-1, CC-2",
			"WEBHOOK_ACME_SECRET", "acme-secret-0123456789", "WEBHOOK_GLOBEX_URL", "http://b.example:8080/h", "WEBHOOK_GLOBEX_ACCOUNTS", "CC-3",
			"WEBHOOK_GLOBEX_SECRET_FILE", secretFile(t, "globex-new-0123456789, globex-old-0123456789\n"), "WEBHOOK_TIMEOUT", "3s",
			"WEBHOOK_ALLOW_HTTP", "true"),
			want: func(c notifications.Config) string {
				return cmp.Diff(notifications.WebhookConfig{
					Default: notifications.Destination{URL: "https://hooks.example/x", Secrets: []notifications.Secret{testSecret}, SecretVar: "WEBHOOK_SECRET"},
					Destinations: []notifications.Destination{
						{Name: "ACME", URL: "https://a.example/h", Accounts: []string{"CC-1", "CC-2"},
							Secrets: []notifications.Secret{"acme-secret-0123456789"}, SecretVar: "WEBHOOK_ACME_SECRET"},
						{Name: "GLOBEX", URL: "http://b.example:8080/h", Accounts: []string{"CC-3"},
							Secrets: []notifications.Secret{"globex-new-0123456789", "globex-old-0123456789"}, SecretVar: "WEBHOOK_GLOBEX_SECRET"},
					},
					Timeout: 3 * time.Second, AllowHTTP: true}, c.Webhook)
			}},
		{name: "rotation: two secrets", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DEFAULT_URL", "https://x.example",
			"WEBHOOK_SECRET", testSecret+","+testSecret+"-old"), want: func(c notifications.Config) string {
			return cmp.Diff([]notifications.Secret{testSecret, testSecret + "-old"}, c.Webhook.Default.Secrets)
		}},
		{name: "unknown channel", env: with("NOTIFY_CHANNEL", "sms"), wantErr: "NOTIFY_CHANNEL"},
		{name: "webhook without secret", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DEFAULT_URL", "https://x.example"), wantErr: "WEBHOOK_SECRET"},
		{name: "short secret", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_SECRET", "short", "WEBHOOK_DEFAULT_URL", "https://x.example"), wantErr: "WEBHOOK_SECRET"},
		{name: "three secrets", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DEFAULT_URL", "https://x.example",
			"WEBHOOK_SECRET", testSecret+"1,"+testSecret+"2,"+testSecret+"3"), wantErr: "WEBHOOK_SECRET holds 3 secrets"},
		{name: "same secret twice", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DEFAULT_URL", "https://x.example",
			"WEBHOOK_SECRET", testSecret+","+testSecret), wantErr: "WEBHOOK_SECRET holds the same secret twice"},
		{name: "secret and secret file", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DEFAULT_URL", "https://x.example",
			"WEBHOOK_SECRET", testSecret, "WEBHOOK_SECRET_FILE", secretFile(t, testSecret)), wantErr: "WEBHOOK_SECRET and WEBHOOK_SECRET_FILE are both set"},
		{name: "missing secret file", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DEFAULT_URL", "https://x.example",
			"WEBHOOK_SECRET_FILE", "/nonexistent/secret"), wantErr: "WEBHOOK_SECRET_FILE"},
		{name: "destination without secret", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DESTINATIONS", "ACME",
			"WEBHOOK_ACME_URL", "https://a.example", "WEBHOOK_ACME_ACCOUNTS", "CC-1"), wantErr: "WEBHOOK_ACME_SECRET (or WEBHOOK_ACME_SECRET_FILE) is required"},
		{name: "destination with three secrets", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DESTINATIONS", "ACME",
			"WEBHOOK_ACME_URL", "https://a.example", "WEBHOOK_ACME_ACCOUNTS", "CC-1",
			"WEBHOOK_ACME_SECRET", testSecret+"1,"+testSecret+"2,"+testSecret+"3"), wantErr: "WEBHOOK_ACME_SECRET holds 3 secrets"},
		{name: "destination without URL or accounts", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DESTINATIONS", "ACME",
			"WEBHOOK_ACME_SECRET", testSecret), wantErr: "WEBHOOK_ACME_URL is required"},
		{name: "destinations share a secret", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DEFAULT_URL", "https://x.example",
			"WEBHOOK_SECRET", testSecret, "WEBHOOK_DESTINATIONS", "ACME", "WEBHOOK_ACME_URL", "https://a.example",
			"WEBHOOK_ACME_ACCOUNTS", "CC-1", "WEBHOOK_ACME_SECRET", testSecret), wantErr: "WEBHOOK_SECRET and WEBHOOK_ACME_SECRET share a secret"},
		{name: "account in two destinations", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DESTINATIONS", "A,B",
			"WEBHOOK_A_URL", "https://a.example", "WEBHOOK_A_ACCOUNTS", "CC-1", "WEBHOOK_A_SECRET", testSecret+"a",
			"WEBHOOK_B_URL", "https://b.example", "WEBHOOK_B_ACCOUNTS", "CC-1", "WEBHOOK_B_SECRET", testSecret+"b"), wantErr: "also in WEBHOOK_A_ACCOUNTS"},
		{name: "bad destination name", env: with("WEBHOOK_DESTINATIONS", "acme-1"), wantErr: "WEBHOOK_DESTINATIONS"},
		{name: "secret without default URL", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_SECRET", testSecret, "WEBHOOK_DESTINATIONS", "ACME",
			"WEBHOOK_ACME_URL", "https://a.example", "WEBHOOK_ACME_ACCOUNTS", "CC-1", "WEBHOOK_ACME_SECRET", testSecret+"a"), wantErr: "WEBHOOK_SECRET is set but WEBHOOK_DEFAULT_URL is not"},
		{name: "webhook without URL", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_SECRET", testSecret), wantErr: "WEBHOOK_DEFAULT_URL or WEBHOOK_DESTINATIONS"},
		{name: "relative URL", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_SECRET", testSecret, "WEBHOOK_DEFAULT_URL", "/hook"), wantErr: "WEBHOOK_DEFAULT_URL"},
		{name: "http refused", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_SECRET", testSecret,
			"WEBHOOK_DEFAULT_URL", "http://hooks.example/h?token=url-token-0123456789"), wantErr: "WEBHOOK_DEFAULT_URL: http://hooks.example/h is http://: webhooks need https://"},
		{name: "destination http refused", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_DESTINATIONS", "ACME",
			"WEBHOOK_ACME_URL", "http://user:pw-0123456789@a.example/h", "WEBHOOK_ACME_ACCOUNTS", "CC-1", "WEBHOOK_ACME_SECRET", testSecret),
			wantErr: "WEBHOOK_ACME_URL: http://a.example/h is http://"},
		{name: "http with the development switch", env: with("NOTIFY_CHANNEL", "webhook", "WEBHOOK_SECRET", testSecret,
			"WEBHOOK_DEFAULT_URL", "http://localhost:9999/h", "WEBHOOK_ALLOW_HTTP", "true"), want: func(c notifications.Config) string {
			if c.Webhook.Default.URL != "http://localhost:9999/h" || !c.Webhook.AllowHTTP {
				return "http:// refused despite WEBHOOK_ALLOW_HTTP=true"
			}
			return ""
		}},
		{name: "WEBHOOK_URLS refused", env: with("WEBHOOK_URLS", "CC-1=http://a.example"), wantErr: "WEBHOOK_URLS is no longer read"},
		{name: "bad timeout", env: with("WEBHOOK_TIMEOUT", "soon"), wantErr: "WEBHOOK_TIMEOUT"},
		{name: "no database", env: map[string]string{}, wantErr: "DATABASE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := notifications.ConfigFromEnv(func(k string) string {
				if v, ok := tt.env[k]; ok {
					return v
				}
				return map[string]string{"AUTH_JWKS_FILE": "/etc/paysuite/jwks.json", "AUTH_ISSUER": "https://issuer.example"}[k]
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), "0123456789") {
					t.Errorf("error leaks a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.want(cfg); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// The secret never shows in formatted configuration.
func TestSecretRedacted(t *testing.T) {
	cfg := notifications.Config{Webhook: notifications.WebhookConfig{
		Default:      notifications.Destination{Secrets: []notifications.Secret{testSecret}},
		Destinations: []notifications.Destination{{Name: "A", Secrets: []notifications.Secret{testSecret, testSecret}}},
	}}
	for _, s := range []string{fmtV(cfg), fmtPlusV(cfg), fmtGoV(cfg)} {
		if strings.Contains(s, testSecret) {
			t.Errorf("formatted config leaks the secret: %s", s)
		}
	}
}

// secretFile writes content to a file of the test's and returns its path.
func secretFile(tb testing.TB, content string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}
