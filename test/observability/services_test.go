package observability

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/test/support/poll"
)

// wait bounds every wait on a running service.
const wait = 60 * time.Second

// TestServiceObservability runs each service and checks, in order, what its
// operators rely on: /readyz follows the database; the outbox gauges follow
// the publisher; after traffic, failures, a poison record and a retry,
// /metrics exposes every family the alerts, dashboard and runbooks use, with
// the right type and labels.
func TestServiceObservability(t *testing.T) {
	for _, service := range serviceNames {
		t.Run(service, func(t *testing.T) {
			t.Parallel()
			h := start(t, service)
			steps := []struct {
				name string
				run  func(t *testing.T, h *harness)
			}{
				{"readyz follows the database", checkReadyzFollowsDatabase},
				{"outbox gauges follow the publisher", checkOutboxGauges},
				{"service traffic", traffic[service]},
				{"poison record goes to the DLT", checkPoisonToDLT},
				{"database outage is waited out", checkDatabaseOutageWaitedOut},
				{"metric families", checkFamilies},
				{"consumer lag per partition", checkLagPerPartition},
			}
			for _, s := range steps {
				h.t = t
				ok := t.Run(s.name, func(t *testing.T) {
					h.t = t
					s.run(t, h)
				})
				h.t = t
				if !ok && s.name != "consumer lag per partition" {
					t.Fatalf("step %q failed; later steps depend on it", s.name)
				}
			}
		})
	}
}

// checkReadyzFollowsDatabase cuts the database off: /readyz answers 503 with
// a problem, /healthz stays 200 (liveness must not restart a pod for a
// database outage); once the database is back, /readyz answers 200.
func checkReadyzFollowsDatabase(t *testing.T, h *harness) {
	h.expectStatus(http.StatusOK, http.MethodGet, "/readyz", nil, "")
	h.db.Cut()
	restored := false
	defer func() {
		if !restored {
			h.db.Restore()
		}
	}()
	var problem httpapi.Problem
	poll.Until(t, wait, "/readyz 503 while the database is cut", func() (bool, string) {
		status, hdr, body := h.do(http.MethodGet, "/readyz", nil, "")
		if status != http.StatusServiceUnavailable {
			return false, fmt.Sprintf("%d %s", status, body)
		}
		if ct := hdr.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("/readyz 503 Content-Type = %q, want application/problem+json", ct)
		}
		if err := json.Unmarshal(body, &problem); err != nil {
			t.Fatalf("/readyz 503 body %s: %v", body, err)
		}
		return true, ""
	})
	if diff := cmp.Diff(httpapi.TypeURI(errkind.Unavailable), problem.Type); diff != "" {
		t.Errorf("problem type mismatch (-want +got):\n%s", diff)
	}
	if problem.Status != http.StatusServiceUnavailable || !strings.Contains(problem.Detail, "database") {
		t.Errorf("problem = %+v, want status 503 and a detail naming the database", problem)
	}
	h.expectStatus(http.StatusOK, http.MethodGet, "/healthz", nil, "")

	h.db.Restore()
	restored = true
	poll.Until(t, wait, "/readyz 200 once the database is back", func() (bool, string) {
		status, _, body := h.do(http.MethodGet, "/readyz", nil, "")
		return status == http.StatusOK && strings.Contains(string(body), `"ready"`), fmt.Sprintf("%d %s", status, body)
	})
}

// checkOutboxGauges cuts the service off Kafka, enqueues an event (the
// transfers service by POST, the others straight into their outbox as their
// business transactions do), and sees it pending with a growing age and
// send failures counted; once Kafka is back, the event is published, counted,
// and the gauges fall to zero.
func checkOutboxGauges(t *testing.T, h *harness) {
	before := mustScrape(t, h.url)
	waitMetrics(t, h.url, wait, "an empty outbox", func(m metrics) (bool, string) {
		return m.value("outbox_pending_events", nil) == 0, m.series("outbox_pending_events")
	})
	topic, eventType := h.probeTopic, "ObservabilityProbe"
	if h.service == "transfers" {
		topic, eventType = h.topics.Requested, events.TypeRequested
	}
	published := map[string]string{"topic": topic, "type": eventType}

	h.kafka.Down()
	up := false
	defer func() {
		if !up {
			h.kafka.Up()
		}
	}()
	var id uuid.UUID
	if h.service == "transfers" {
		id = uuid.New()
		h.expectStatus(http.StatusAccepted, http.MethodPost, "/transferencias", map[string]string{
			"Content-Type": "application/json", "Idempotency-Key": id.String(),
		}, `{"contaOrigem":"CC-OBS-1","contaDestino":"CC-OBS-2","valorEmCentavos":100,"moeda":"BRL"}`)
	} else {
		id = h.enqueue()
	}
	failures := before.value("outbox_send_failures_total", nil)
	waitMetrics(t, h.url, wait, "the event pending, ageing, and its sends failing", func(m metrics) (bool, string) {
		ok := m.value("outbox_pending_events", nil) >= 1 &&
			m.value("outbox_oldest_pending_age_seconds", nil) > 0.2 &&
			m.value("outbox_send_failures_total", nil) > failures
		return ok, m.series("outbox_pending_events") + "; " + m.series("outbox_oldest_pending_age_seconds") + "; " +
			m.series("outbox_send_failures_total")
	})
	down := mustScrape(t, h.url)
	if v := down.value("outbox_published_total", published); v != before.value("outbox_published_total", published) {
		t.Errorf("outbox_published_total%v moved to %g while Kafka was unreachable", published, v)
	}
	if _, ok := down.sum("outbox_send_failures_total", map[string]string{"cause": "network"}); !ok {
		t.Errorf("no send failure with cause=\"network\" while Kafka was unreachable: %s", down.series("outbox_send_failures_total"))
	}
	if v := down.value("outbox_dead_events", nil); v != 0 {
		t.Errorf("outbox_dead_events = %g during an outage: an unreachable broker must not kill events", v)
	}

	h.kafka.Up()
	up = true
	after := waitMetrics(t, h.url, wait, "the event published and the gauges back to zero", func(m metrics) (bool, string) {
		ok := m.value("outbox_pending_events", nil) == 0 && m.value("outbox_oldest_pending_age_seconds", nil) == 0 &&
			m.value("outbox_published_total", published) == before.value("outbox_published_total", published)+1
		return ok, m.series("outbox_pending_events") + "; " + m.series("outbox_oldest_pending_age_seconds") + "; " +
			m.series("outbox_published_total")
	})
	if got, was := after.value("outbox_enqueue_to_ack_seconds", nil), before.value("outbox_enqueue_to_ack_seconds", nil); got <= was {
		t.Errorf("outbox_enqueue_to_ack_seconds count = %g, was %g: the publication was not observed", got, was)
	}
	if got, was := after.value("outbox_relay_batch_size", nil), before.value("outbox_relay_batch_size", nil); got <= was {
		t.Errorf("outbox_relay_batch_size count = %g, was %g: no batch observed", got, was)
	}
	h.expectRecord(topic, func(m kafka.Message) bool {
		if h.service == "transfers" {
			return header(m, events.HeaderCorrelationID) == id.String()
		}
		return header(m, events.HeaderEventID) == id.String()
	})
}

// checkPoisonToDLT writes an undecodable record to the consumed topic: it is
// counted by origin topic on its way to the DLT.
func checkPoisonToDLT(t *testing.T, h *harness) {
	origin := map[string]string{"origin_topic": h.consumed()}
	was := mustScrape(t, h.url).value("consumer_dlt_records_total", origin)
	h.produce(poison(h.consumed()))
	waitMetrics(t, h.url, wait, "the poison record counted on its way to the DLT", func(m metrics) (bool, string) {
		ok := m.value("consumer_dlt_records_total", origin) == was+1 &&
			m.value("consumer_records_total", map[string]string{"group": h.group, "topic": h.consumed(), "outcome": "poison"}) >= 1
		if h.service == "ledger" { // the ledger's DLT monitor reads it back
			ok = ok && m.value("ledger_dlt_messages_total", origin) >= 1
		}
		return ok, m.series("consumer_dlt_records_total") + "; " + m.series("consumer_records_total") + "; " +
			m.series("ledger_dlt_messages_total")
	})
	h.expectRecord(events.DLT(h.consumed()), func(m kafka.Message) bool { return string(m.Value) == "{not json" })
}

// checkDatabaseOutageWaitedOut cuts the database while a valid record
// arrives: the handler fails, the wait is counted (not as a retry attempt,
// and nothing is dead-lettered), and once the database is back the record
// is handled.
func checkDatabaseOutageWaitedOut(t *testing.T, h *harness) {
	ok := map[string]string{"outcome": "ok"}
	handled := mustScrape(t, h.url).value("consumer_records_total", ok)
	waits := map[string]string{"group": h.group}
	was := mustScrape(t, h.url).value("consumer_dependency_waits_total", waits)
	origin := map[string]string{"origin_topic": h.consumed()}
	dlt := mustScrape(t, h.url).value("consumer_dlt_records_total", origin)

	h.db.Cut()
	restored := false
	defer func() {
		if !restored {
			h.db.Restore()
		}
	}()
	h.produce(h.validInput())
	waitMetrics(t, h.url, wait, "a wait counted while the database is cut", func(m metrics) (bool, string) {
		return m.value("consumer_dependency_waits_total", waits) > was && m.value("consumer_dependency_waiting", waits) == 1,
			m.series("consumer_dependency_waits_total") + "; " + m.series("consumer_dependency_waiting")
	})
	h.db.Restore()
	restored = true
	m := waitMetrics(t, h.url, wait, "the record handled once the database is back", func(m metrics) (bool, string) {
		return m.value("consumer_records_total", ok) > handled && m.value("consumer_dependency_waiting", waits) == 0,
			m.series("consumer_records_total") + "; " + m.series("consumer_dependency_waiting")
	})
	if got := m.value("consumer_dlt_records_total", origin); got != dlt {
		t.Errorf("consumer_dlt_records_total went from %v to %v during a database outage", dlt, got)
	}
}

// checkFamilies scrapes /metrics and checks every family the service must
// expose: present, of its type, with exactly its labels on every series.
func checkFamilies(t *testing.T, h *harness) {
	// consumer_lag is sampled every 5s; wait for one sample of every loop.
	m := waitMetrics(t, h.url, wait, "consumer_lag reported", func(m metrics) (bool, string) {
		_, ok := m.sum("consumer_lag", map[string]string{"group": h.group})
		return ok, m.series("consumer_lag")
	})
	for _, f := range expectedFamilies(h.service) {
		mf := m[f.Name]
		if mf == nil {
			t.Errorf("%s: family %s absent from /metrics", h.service, f.Name)
			continue
		}
		if mf.GetType() != f.Type {
			t.Errorf("%s: %s is a %v, want %v", h.service, f.Name, mf.GetType(), f.Type)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s: %s has no HELP", h.service, f.Name)
		}
		for _, s := range mf.GetMetric() {
			if diff := cmp.Diff(f.Labels, labelNames(s)); diff != "" {
				t.Errorf("%s: labels of a %s series mismatch (-want +got):\n%s", h.service, f.Name, diff)
				break
			}
		}
	}
	// The series the alerts select exist with the label values they use.
	want := []struct {
		name  string
		match map[string]string
	}{
		{"consumer_records_total", map[string]string{"group": h.group, "topic": h.consumed(), "outcome": "ok"}},
		{"consumer_handler_duration_seconds", map[string]string{"group": h.group, "topic": h.consumed()}},
		{"consumer_dlt_records_total", map[string]string{"origin_topic": h.consumed()}},
		{"consumer_dependency_waits_total", map[string]string{"group": h.group}},
		{"http_requests_total", map[string]string{"method": "GET", "route": "/readyz", "status": "503"}},
	}
	if h.service == "transfers" {
		want = append(want,
			struct {
				name  string
				match map[string]string
			}{"http_requests_total", map[string]string{"method": "POST", "route": "/transferencias", "status": "202"}},
			struct {
				name  string
				match map[string]string
			}{"inbox_duplicates_total", map[string]string{"consumer": h.group}})
	}
	for _, w := range want {
		if v, ok := m.sum(w.name, w.match); !ok || v == 0 {
			t.Errorf("%s: no %s%v series with a non-zero value: %s", h.service, w.name, w.match, m.series(w.name))
		}
	}
}

// checkLagPerPartition checks that consumer_lag is reported per topic and
// partition (what the ConsumerLagGrowing alert needs), not
// as one number per reader.
func checkLagPerPartition(t *testing.T, h *harness) {
	m := mustScrape(t, h.url)
	f := m["consumer_lag"]
	if f == nil {
		t.Fatalf("%s: consumer_lag absent", h.service)
	}
	for _, s := range f.GetMetric() {
		ls := labelsOf(s)
		if ls["group"] != h.group {
			continue
		}
		p, err := strconv.Atoi(ls["partition"])
		if !slices.Contains(slices.Concat(h.topics.All(), h.topics.Holds(), h.topics.Refunds()), ls["topic"]) || err != nil || p < 0 {
			t.Errorf("%s: consumer_lag{group=%q, topic=%q, partition=%q}: want topic %s (or another topic the group reads) and a partition number >= 0",
				h.service, ls["group"], ls["topic"], ls["partition"], h.consumed())
		}
	}
}

// traffic drives each service's own work, so that its own families and the
// Vec families (which appear once a label set is used) are present.
var traffic = map[string]func(t *testing.T, h *harness){
	"transfers": func(t *testing.T, h *harness) {
		key := uuid.New()
		hdr := map[string]string{"Content-Type": "application/json", "Idempotency-Key": key.String()}
		body := `{"contaOrigem":"CC-OBS-1","contaDestino":"CC-OBS-2","valorEmCentavos":500,"moeda":"BRL"}`
		h.expectStatus(http.StatusAccepted, http.MethodPost, "/transferencias", hdr, body)
		if got := h.expectStatus(http.StatusAccepted, http.MethodPost, "/transferencias", hdr, body).Get("Idempotent-Replayed"); got != "true" {
			t.Errorf("replay header = %q, want true", got)
		}
		h.expectStatus(http.StatusUnprocessableEntity, http.MethodPost, "/transferencias", hdr, strings.Replace(body, "500", "501", 1))
		h.expectStatus(http.StatusBadRequest, http.MethodPost, "/transferencias", map[string]string{"Content-Type": "application/json"}, body)
		h.expectStatus(http.StatusOK, http.MethodGet, "/transferencias/"+key.String(), nil, "")
		// The settlement result, delivered twice: the second is an inbox
		// duplicate.
		ev := settled(h.topics.Settled, key)
		h.produce(ev)
		h.produce(ev)
		waitMetrics(t, h.url, wait, "replay, conflict, publication and duplicate counted", func(m metrics) (bool, string) {
			ok := m.value("transfers_idempotent_replays_total", nil) >= 1 &&
				m.value("transfers_idempotency_conflicts_total", map[string]string{"reason": "key_reused"}) >= 1 &&
				m.value("outbox_published_total", map[string]string{"topic": h.topics.Requested, "type": events.TypeRequested}) >= 1 &&
				m.value("inbox_duplicates_total", map[string]string{"consumer": h.group}) >= 1
			return ok, m.series("transfers_idempotent_replays_total") + "; " + m.series("transfers_idempotency_conflicts_total") +
				"; " + m.series("outbox_published_total") + "; " + m.series("inbox_duplicates_total")
		})
		if _, ok := mustScrape(t, h.url).sum("transfers_idempotency_conflicts_total", map[string]string{"reason": "in_progress"}); !ok {
			t.Errorf("transfers_idempotency_conflicts_total{reason=\"in_progress\"} is not initialised at zero")
		}
	},
	"ledger": func(t *testing.T, h *harness) {
		for _, id := range []string{"CC-OBS-1", "CC-OBS-2"} {
			h.expectStatus(http.StatusCreated, http.MethodPost, "/contas", map[string]string{"Content-Type": "application/json"},
				`{"id":"`+id+`","moeda":"BRL"}`)
		}
		h.expectStatus(http.StatusCreated, http.MethodPost, "/contas/CC-OBS-1/depositos",
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": uuid.NewString(), "Authorization": h.minter}, `{"valorEmCentavos":100000}`)
		h.expectStatus(http.StatusOK, http.MethodGet, "/contas/CC-OBS-1", nil, "")
		h.produce(h.analysed(uuid.New(), "CC-OBS-1", "CC-OBS-2", 100),
			h.analysed(uuid.New(), "CC-OBS-1", "CC-NOBODY", 100))
		waitMetrics(t, h.url, wait, "a settlement and a rejection counted and published", func(m metrics) (bool, string) {
			ok := m.value("ledger_settlements_total", map[string]string{"result": "LIQUIDADA"}) >= 1 &&
				m.value("ledger_settlements_total", map[string]string{"result": "REJEITADA", "reason": events.ReasonAccountNotFound}) >= 1 &&
				m.value("ledger_settlement_batch_size", nil) >= 1 &&
				m.value("outbox_published_total", map[string]string{"topic": h.topics.Settled, "type": events.TypeSettled}) >= 1 &&
				m.value("outbox_published_total", map[string]string{"topic": h.topics.Rejected, "type": events.TypeRejected}) >= 1
			return ok, m.series("ledger_settlements_total") + "; " + m.series("outbox_published_total")
		})
	},
	"antifraud": func(t *testing.T, h *harness) {
		small := requested(h.topics.Requested, uuid.New(), "CC-OBS-1", "CC-OBS-2", 100)
		h.produce(small, requested(h.topics.Requested, uuid.New(), "CC-OBS-1", "CC-OBS-2", 10_000_000), small)
		waitMetrics(t, h.url, wait, "an approval, a block and a duplicate counted and published", func(m metrics) (bool, string) {
			ok := m.value("antifraud_decisions_total", map[string]string{"outcome": "APPROVED"}) >= 1 &&
				m.value("antifraud_decisions_total", map[string]string{"outcome": "BLOCKED"}) >= 1 &&
				m.value("antifraud_rules_fired_total", map[string]string{"rule": "high_amount"}) >= 1 &&
				m.value("antifraud_duplicate_requests_total", nil) >= 1 &&
				m.value("outbox_published_total", map[string]string{"topic": h.topics.Analysed, "type": events.TypeAnalysed}) >= 1 &&
				m.value("outbox_published_total", map[string]string{"topic": h.topics.Rejected, "type": events.TypeRejected}) >= 1
			return ok, m.series("antifraud_decisions_total") + "; " + m.series("antifraud_rules_fired_total") + "; " +
				m.series("antifraud_duplicate_requests_total") + "; " + m.series("outbox_published_total")
		})
	},
	"notifications": func(t *testing.T, h *harness) {
		h.produce(settled(h.topics.Settled, uuid.New()), rejected(h.topics.Rejected, uuid.New(), events.ReasonInsufficientFunds))
		waitMetrics(t, h.url, wait, "two notifications delivered", func(m metrics) (bool, string) {
			ok := m.value("notifications_sends_total", map[string]string{"channel": "log", "outcome": "delivered"}) >= 2 &&
				m.value("notifications_send_duration_seconds", map[string]string{"channel": "log"}) >= 2
			return ok, m.series("notifications_sends_total")
		})
	},
}

// expectRecord reads topic from the start until a record satisfies match.
func (h *harness) expectRecord(topic string, match func(kafka.Message) bool) {
	h.t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: h.brokers, Topic: topic, Partition: 0, MaxWait: 250 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			h.t.Fatalf("no matching record on %s: %v", topic, err)
		}
		if match(m) {
			return
		}
	}
}

func header(m kafka.Message, name string) string {
	for _, hd := range m.Headers {
		if hd.Key == name {
			return string(hd.Value)
		}
	}
	return ""
}
