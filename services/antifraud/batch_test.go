package antifraud_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/poll"
)

// TestBatchWithARecordTheDatabaseRefuses hands the service one fetched
// batch in which one record fails at the database on every attempt. The
// batch's transaction must roll back whole; then that record alone goes to
// the DLT, and every other record is decided exactly once, in offset order
// (velocity sees them in that order), its event emitted exactly once.
func TestBatchWithARecordTheDatabaseRefuses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	ctx := context.Background()
	if _, err := h.pool.Exec(ctx, `
CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.source_account = 'CC-POISON' THEN RAISE EXCEPTION 'poison transfer %', NEW.transfer_id; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT ON decision FOR EACH ROW EXECUTE FUNCTION refuse_poison();`); err != nil {
		t.Fatal(err)
	}
	// Produced before the service starts: its first fetch holds them all.
	var good []events.Requested
	for i := range 12 {
		if i == 5 {
			h.produce(request("CC-POISON", 100), nil)
		}
		req := request("CC-001", 100)
		req.ClientID = "app"
		h.produce(req, nil)
		good = append(good, req)
	}
	cfg := risk.DefaultConfig()
	cfg.VelocityMaxCount = 8
	inst := h.start(cfg)
	h.settle()

	var wantAnalysed, wantRejected []string
	for i, req := range good {
		if i < 8 {
			wantAnalysed = append(wantAnalysed, events.DerivedID("analisada", req.TransferID).String())
		} else {
			wantRejected = append(wantRejected, events.DerivedID("rejeitada-antifraude", req.TransferID).String())
		}
	}
	eventIDs := func(topic string) []string {
		var out []string
		for _, r := range h.list(topic) {
			out = append(out, headers(r)[events.HeaderEventID])
		}
		return out
	}
	if diff := cmp.Diff(wantAnalysed, eventIDs(h.topics.Analysed)); diff != "" {
		t.Errorf("analysed events, in order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantRejected, eventIDs(h.topics.Rejected)); diff != "" {
		t.Errorf("rejected events, in order (-want +got):\n%s", diff)
	}
	dlt := h.list(events.DLT(h.topics.Requested))
	if len(dlt) != 1 || string(dlt[0].Key) != "CC-POISON" {
		t.Errorf("DLT holds %d records, want the poison one alone", len(dlt))
	}
	if n := len(h.decisions()); n != len(good) {
		t.Errorf("%d decisions, want %d", n, len(good))
	}
	var outboxRows int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM outbox_event`).Scan(&outboxRows); err != nil {
		t.Fatal(err)
	}
	if outboxRows != len(good) {
		t.Errorf("%d outbox rows, want %d", outboxRows, len(good))
	}
	// The records were handed over as a batch (which failed, then went
	// one by one): else this test tested nothing.
	status, body := inst.get(t, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d", status)
	}
	m := regexp.MustCompile(`(?m)^consumer_batch_size_sum(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no consumer_batch_size_sum in /metrics")
	}
	if sum, _ := strconv.ParseFloat(m[1], 64); sum < 2 {
		t.Errorf("consumer_batch_size_sum = %v: no batch was handed to the handler", sum)
	}
}

// TestBatchWaitsOutADatabaseOutage: while the database is unreachable, a
// fetched batch fails, and its records, its first retried alone, wait for it
// (pkg/outage) well past the policy's retries without being dead-lettered
// or decided; once it is back, each is decided once, in order.
func TestBatchWaitsOutADatabaseOutage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	dsn, proxy := netfault.PostgresURL(t, h.dsn)
	h.dsn = dsn // the service goes through the proxy; h.pool does not
	inst := h.start(risk.DefaultConfig())
	proxy.Cut()
	var reqs []events.Requested
	for range 10 {
		req := request("CC-001", 100)
		h.produce(req, nil)
		reqs = append(reqs, req)
	}
	waits := regexp.MustCompile(`(?m)^consumer_dependency_waits_total(?:\{[^}]*\})? (\S+)$`)
	poll.Until(t, 90*time.Second, "the records waiting past the policy's retries", func() (bool, string) {
		_, body := inst.get(t, "/metrics")
		m := waits.FindStringSubmatch(body)
		if m == nil {
			return false, "no consumer_dependency_waits_total"
		}
		n, _ := strconv.ParseFloat(m[1], 64)
		return n > float64(consumer.BlockingRetries.Retries+1), m[1]
	})
	if dlt := h.list(events.DLT(h.topics.Requested)); len(dlt) != 0 {
		t.Fatalf("%d records dead-lettered during a database outage", len(dlt))
	}
	proxy.Restore()
	h.settle()
	var want []string
	for _, req := range reqs {
		want = append(want, events.DerivedID("analisada", req.TransferID).String())
	}
	var got []string
	for _, r := range h.list(h.topics.Analysed) {
		got = append(got, headers(r)[events.HeaderEventID])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("analysed events after the outage (-want +got):\n%s", diff)
	}
	if dlt := h.list(events.DLT(h.topics.Requested)); len(dlt) != 0 {
		t.Errorf("%d records dead-lettered", len(dlt))
	}
}

// TestBatchWithAPoisonRecord hands the service one fetched batch with an
// undecodable record in the middle. The records before it are decided by
// the batch and committed; the poison record alone goes to the DLT; the
// records after it are decided as a batch: each decided exactly once, in
// offset order, its event emitted exactly once.
func TestBatchWithAPoisonRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	ctx := context.Background()
	// Produced before the service starts: its first fetch holds them all.
	var want []string
	for i := range 10 {
		if i == 5 {
			h.produceRaw("CC-001", []byte("{"), map[string]string{events.HeaderEventType: events.TypeRequested})
		}
		req := request("CC-001", 100)
		h.produce(req, nil)
		want = append(want, events.DerivedID("analisada", req.TransferID).String())
	}
	inst := h.start(risk.DefaultConfig())
	h.settle()

	var got []string
	for _, r := range h.list(h.topics.Analysed) {
		got = append(got, headers(r)[events.HeaderEventID])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("analysed events, in order (-want +got):\n%s", diff)
	}
	if dlt := h.list(events.DLT(h.topics.Requested)); len(dlt) != 1 || string(dlt[0].Value) != "{" {
		t.Errorf("DLT holds %d records, want the poison one alone", len(dlt))
	}
	if n := len(h.decisions()); n != len(want) {
		t.Errorf("%d decisions, want %d", n, len(want))
	}
	var outboxRows int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM outbox_event`).Scan(&outboxRows); err != nil {
		t.Fatal(err)
	}
	if outboxRows != len(want) {
		t.Errorf("%d outbox rows, want %d", outboxRows, len(want))
	}
	// The records were handed over as a batch: else this test tested
	// nothing.
	_, body := inst.get(t, "/metrics")
	m := regexp.MustCompile(`(?m)^consumer_batch_size_sum(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no consumer_batch_size_sum in /metrics")
	}
	if sum, _ := strconv.ParseFloat(m[1], 64); sum < 2 {
		t.Errorf("consumer_batch_size_sum = %v: no batch was handed to the handler", sum)
	}
}
