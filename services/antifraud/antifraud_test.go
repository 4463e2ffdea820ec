package antifraud_test

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestRequestsBecomeOneResultEach runs the service end to end: a transfer
// under the threshold yields exactly one TransferenciaAnalisada with the
// input's fields and score 10; one at R$ 100.000,00 yields exactly one
// TransferenciaRejeitada BLOQUEADA_ANTIFRAUDE.
func TestRequestsBecomeOneResultEach(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2)
	inst := h.start(risk.DefaultConfig())

	small := request("CC-001", 30_000)
	big := request("CC-104", 10_000_000)
	h.produce(small, map[string]string{events.HeaderTraceparent: traceparent})
	h.produce(big, nil)
	h.settle()

	analysed := h.list(h.topics.Analysed)
	if len(analysed) != 1 {
		t.Fatalf("%d records on the analysed topic, want 1", len(analysed))
	}
	var gotA events.Analysed
	if err := json.Unmarshal(analysed[0].Value, &gotA); err != nil {
		t.Fatal(err)
	}
	wantID := events.DerivedID("analisada", small.TransferID)
	wantA := events.Analysed{
		EventID: wantID, TransferID: small.TransferID, SourceAccount: "CC-001", DestAccount: "CC-002",
		AmountCents: 30_000, Currency: "BRL", RiskScore: 10, OccurredAt: gotA.OccurredAt,
		RequestEventID: small.EventID, // the binding to the request decided
	}
	if diff := cmp.Diff(wantA, gotA); diff != "" {
		t.Errorf("TransferenciaAnalisada mismatch (-want +got):\n%s", diff)
	}
	if time.Since(gotA.OccurredAt) > time.Minute {
		t.Errorf("ocorridoEm %v is not the decision time", gotA.OccurredAt)
	}
	if got := string(analysed[0].Key); got != "CC-001" {
		t.Errorf("key %q, want contaOrigem CC-001", got)
	}
	wantHeaders := map[string]string{
		events.HeaderEventID:       wantID.String(),
		events.HeaderEventType:     events.TypeAnalysed,
		events.HeaderCorrelationID: small.TransferID.String(),
		events.HeaderTraceparent:   traceparent,
	}
	if diff := cmp.Diff(wantHeaders, headers(analysed[0])); diff != "" {
		t.Errorf("analysed headers mismatch (-want +got):\n%s", diff)
	}

	rejected := h.list(h.topics.Rejected)
	if len(rejected) != 1 {
		t.Fatalf("%d records on the rejected topic, want 1", len(rejected))
	}
	var gotR events.Rejected
	if err := json.Unmarshal(rejected[0].Value, &gotR); err != nil {
		t.Fatal(err)
	}
	wantRID := events.DerivedID("rejeitada-antifraude", big.TransferID)
	wantR := events.Rejected{EventID: wantRID, TransferID: big.TransferID, Reason: "BLOQUEADA_ANTIFRAUDE", OccurredAt: gotR.OccurredAt,
		RequestEventID: big.EventID}
	if diff := cmp.Diff(wantR, gotR); diff != "" {
		t.Errorf("TransferenciaRejeitada mismatch (-want +got):\n%s", diff)
	}
	if got := string(rejected[0].Key); got != "CC-104" {
		t.Errorf("key %q, want contaOrigem CC-104", got)
	}
	wantHeaders = map[string]string{
		events.HeaderEventID:       wantRID.String(),
		events.HeaderEventType:     events.TypeRejected,
		events.HeaderCorrelationID: big.TransferID.String(),
	}
	if diff := cmp.Diff(wantHeaders, headers(rejected[0])); diff != "" {
		t.Errorf("rejected headers mismatch (-want +got):\n%s", diff)
	}

	wantDecisions := map[uuid.UUID]decision{
		small.TransferID: {Outcome: "APPROVED", Score: 10, Rules: []string{}, EventID: wantID},
		big.TransferID:   {Outcome: "BLOCKED", Score: 95, Rules: []string{risk.RuleHighAmount}, EventID: wantRID},
	}
	if diff := cmp.Diff(wantDecisions, h.decisions(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("decisions mismatch (-want +got):\n%s", diff)
	}

	// Operations: health and the decision metrics.
	if status, body := inst.get(t, "/healthz"); status != http.StatusOK {
		t.Errorf("/healthz: %d %s", status, body)
	}
	_, metrics := inst.get(t, "/metrics")
	for _, want := range []string{
		`antifraud_decisions_total{outcome="APPROVED"} 1`,
		`antifraud_decisions_total{outcome="BLOCKED"} 1`,
		`antifraud_rules_fired_total{rule="high_amount"} 1`,
		`antifraud_rules_fired_total{rule="velocity_count"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestSameRequestToTwoInstances delivers one request three times, on two
// partitions consumed by two instances of the service in one group: one
// decision, one event, with the derived id.
func TestSameRequestToTwoInstances(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2)
	h.start(risk.DefaultConfig())
	h.start(risk.DefaultConfig())

	req := request("CC-220", 5_000)
	h.produce(req, map[string]string{headerPartition: "0"})
	h.produce(req, map[string]string{headerPartition: "1"})
	h.produce(req, map[string]string{headerPartition: "0"}) // a plain redelivery
	h.settle()

	wantID := events.DerivedID("analisada", req.TransferID)
	recs := h.list(h.topics.Analysed)
	var ids []string
	for _, r := range recs {
		ids = append(ids, headers(r)[events.HeaderEventID])
	}
	if diff := cmp.Diff([]string{wantID.String()}, ids); diff != "" {
		t.Errorf("analysed event ids mismatch (-want +got):\n%s", diff)
	}
	if n := len(h.list(h.topics.Rejected)); n != 0 {
		t.Errorf("%d rejected records, want 0", n)
	}
	want := map[uuid.UUID]decision{req.TransferID: {Outcome: "APPROVED", Score: 10, Rules: []string{}, EventID: wantID}}
	if diff := cmp.Diff(want, h.decisions(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("decisions mismatch (-want +got):\n%s", diff)
	}
}

// TestVelocitySurvivesRestart: the velocity history is the decision table,
// so a restart between the transfers that trip the limit changes nothing.
func TestVelocitySurvivesRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	cfg := risk.DefaultConfig()
	cfg.VelocityMaxCount = 2
	cfg.VelocityWindow = time.Hour

	first := h.start(cfg)
	t1, t2 := request("CC-555", 1_000), request("CC-555", 2_000)
	h.produce(t1, nil)
	h.produce(t2, nil)
	h.settle()
	first.stop(t)

	h.start(cfg)
	t3 := request("CC-555", 3_000)
	h.produce(t3, nil)
	h.settle()

	want := map[uuid.UUID]decision{
		t1.TransferID: {Outcome: "APPROVED", Score: 10, EventID: events.DerivedID("analisada", t1.TransferID)},
		t2.TransferID: {Outcome: "APPROVED", Score: 10, EventID: events.DerivedID("analisada", t2.TransferID)},
		t3.TransferID: {Outcome: "BLOCKED", Score: 90, Rules: []string{risk.RuleVelocityCount},
			EventID: events.DerivedID("rejeitada-antifraude", t3.TransferID)},
	}
	if diff := cmp.Diff(want, h.decisions(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("decisions mismatch (-want +got):\n%s", diff)
	}
	rejected := h.list(h.topics.Rejected)
	if len(rejected) != 1 {
		t.Fatalf("%d rejected records, want 1", len(rejected))
	}
	var got events.Rejected
	if err := json.Unmarshal(rejected[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	if got.TransferID != t3.TransferID || got.Reason != events.ReasonBlockedByAntifraud {
		t.Errorf("rejected %+v, want %s blocked by antifraud", got, t3.TransferID)
	}
	if n := len(h.list(h.topics.Analysed)); n != 2 {
		t.Errorf("%d analysed records, want 2", n)
	}
}

// TestPoisonRecordsGoToTheDLT: undecodable requests and requests missing a
// required field land on the DLT with Spring's headers, and the record
// behind them on the same partition is processed.
func TestPoisonRecordsGoToTheDLT(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	h.start(risk.DefaultConfig())

	missing := request("CC-042", 100)
	missing.SourceAccount = ""
	missingJSON, err := json.Marshal(missing)
	if err != nil {
		t.Fatal(err)
	}
	poisons := []struct {
		name    string
		value   []byte
		headers map[string]string
		wantMsg string
	}{
		{"not JSON", []byte(`{"transferenciaId": `), map[string]string{events.HeaderEventID: "poison-1"}, "malformed event"},
		{"missing contaOrigem", missingJSON, map[string]string{events.HeaderEventID: missing.EventID.String(),
			events.HeaderCorrelationID: missing.TransferID.String(), events.HeaderTraceparent: traceparent}, `"contaOrigem"`},
		{"amount as a string", []byte(`{"eventoId":"` + uuid.NewString() + `","valorEmCentavos":"100"}`), nil, "malformed event"},
		{"another event type", missingJSON, map[string]string{events.HeaderEventType: events.TypeSettled}, "unexpected event type"},
	}
	for _, p := range poisons {
		h.produceRaw("CC-042", p.value, p.headers)
	}
	good := request("CC-042", 100)
	h.produce(good, nil)
	h.settle()

	dead := h.list(events.DLT(h.topics.Requested))
	if len(dead) != len(poisons) {
		t.Fatalf("%d records on the DLT, want %d", len(dead), len(poisons))
	}
	for i, p := range poisons {
		t.Run(p.name, func(t *testing.T) {
			r := dead[i]
			hs := headers(r)
			if string(r.Value) != string(p.value) || string(r.Key) != "CC-042" {
				t.Errorf("DLT record key %q value %q, want the original", r.Key, r.Value)
			}
			for k, v := range p.headers {
				if hs[k] != v {
					t.Errorf("original header %s = %q, want %q", k, hs[k], v)
				}
			}
			if got := hs[dlt.HeaderDLTOriginalTopic]; got != h.topics.Requested {
				t.Errorf("%s = %q, want %q", dlt.HeaderDLTOriginalTopic, got, h.topics.Requested)
			}
			if got := hs[dlt.HeaderDLTOriginalGroup]; got != h.group {
				t.Errorf("%s = %q, want %q", dlt.HeaderDLTOriginalGroup, got, h.group)
			}
			if got := int32(binary.BigEndian.Uint32([]byte(hs[dlt.HeaderDLTOriginalPartition]))); got != 0 { //nolint:gosec // test
				t.Errorf("%s = %d, want 0", dlt.HeaderDLTOriginalPartition, got)
			}
			if got := int64(binary.BigEndian.Uint64([]byte(hs[dlt.HeaderDLTOriginalOffset]))); got != int64(i) { //nolint:gosec // test
				t.Errorf("%s = %d, want %d", dlt.HeaderDLTOriginalOffset, got, i)
			}
			if len(hs[dlt.HeaderDLTOriginalTimestamp]) != 8 {
				t.Errorf("%s has %d bytes, want an 8-byte long", dlt.HeaderDLTOriginalTimestamp, len(hs[dlt.HeaderDLTOriginalTimestamp]))
			}
			if hs[dlt.HeaderDLTExceptionFQCN] == "" {
				t.Errorf("%s is empty", dlt.HeaderDLTExceptionFQCN)
			}
			if msg := hs[dlt.HeaderDLTExceptionMessage]; !strings.Contains(msg, p.wantMsg) {
				t.Errorf("%s = %q, want it to mention %q", dlt.HeaderDLTExceptionMessage, msg, p.wantMsg)
			}
		})
	}

	analysed := h.list(h.topics.Analysed)
	if len(analysed) != 1 || headers(analysed[0])[events.HeaderEventID] != events.DerivedID("analisada", good.TransferID).String() {
		t.Errorf("analysed records %d, want exactly the good request's", len(analysed))
	}
	if n := len(h.decisions()); n != 1 {
		t.Errorf("%d decisions, want 1 (poison records decide nothing)", n)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	// own is the part of the configuration this service defines.
	type own struct {
		Service  string
		HTTPAddr string
		Topics   events.Topics
		Group    string
		Risk     risk.Config
		BatchMax int
	}
	defaults := own{Service: "antifraud", HTTPAddr: ":8082", Topics: events.DefaultTopics, Group: "antifraude", BatchMax: 50,
		Risk: risk.Config{BaseScore: 10, BlockThreshold: 80, HighAmountCents: 10_000_000, HighAmountScore: 95,
			VelocityWindow: time.Hour, VelocityMaxCount: 20, VelocityMaxCents: 20_000_000, VelocityScore: 90,
			BlocklistScore: 100}}
	tests := []struct {
		name    string
		env     map[string]string
		want    func(*own)
		wantErr []string
	}{
		{name: "defaults", env: map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/a"}, want: func(*own) {}},
		{
			name: "overrides",
			env: map[string]string{
				"DATABASE_URL":                 "postgres://x@127.0.0.1/a",
				"HTTP_ADDR":                    ":9999",
				"ANTIFRAUD_BASE_SCORE":         "5",
				"ANTIFRAUD_BLOCK_THRESHOLD":    "70",
				"ANTIFRAUD_HIGH_AMOUNT_CENTS":  "500000",
				"ANTIFRAUD_HIGH_AMOUNT_SCORE":  "75",
				"ANTIFRAUD_VELOCITY_WINDOW":    "10m",
				"ANTIFRAUD_VELOCITY_MAX_COUNT": "0",
				"ANTIFRAUD_VELOCITY_MAX_CENTS": "123",
				"ANTIFRAUD_VELOCITY_SCORE":     "85",
				"ANTIFRAUD_BLOCKLIST":          " CC-666, CC-013 ,",
				"ANTIFRAUD_BLOCKLIST_SCORE":    "99",
				"ANTIFRAUD_BATCH_MAX":          "1",
			},
			want: func(o *own) {
				o.HTTPAddr = ":9999"
				o.BatchMax = 1
				o.Risk = risk.Config{BaseScore: 5, BlockThreshold: 70, HighAmountCents: 500_000, HighAmountScore: 75,
					VelocityWindow: 10 * time.Minute, VelocityMaxCount: 0, VelocityMaxCents: 123, VelocityScore: 85,
					Blocklist: []string{"CC-666", "CC-013"}, BlocklistScore: 99}
			},
		},
		{
			name:    "every problem at once",
			env:     map[string]string{"ANTIFRAUD_BLOCK_THRESHOLD": "0", "ANTIFRAUD_VELOCITY_WINDOW": "soon"},
			wantErr: []string{"DATABASE_URL is required", "ANTIFRAUD_VELOCITY_WINDOW", "block threshold 0"},
		},
		{
			name:    "negative limit",
			env:     map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/a", "ANTIFRAUD_VELOCITY_MAX_CENTS": "-1"},
			wantErr: []string{"velocity max cents -1 is negative"},
		},
		{
			name:    "batch size out of range",
			env:     map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/a", "ANTIFRAUD_BATCH_MAX": "0"},
			wantErr: []string{"ANTIFRAUD_BATCH_MAX: 0 is not within 1..1000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := antifraud.ConfigFromEnv(func(k string) string {
				if v, ok := tt.env[k]; ok {
					return v
				}
				return map[string]string{"AUTH_JWKS_FILE": "/etc/paysuite/jwks.json", "AUTH_ISSUER": "https://issuer.example"}[k]
			})
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := defaults
			tt.want(&want)
			got := own{Service: cfg.Service, HTTPAddr: cfg.HTTPAddr, Topics: cfg.Topics, Group: cfg.Group, Risk: cfg.Risk, BatchMax: cfg.BatchMax}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config mismatch (-want +got):\n%s", diff)
			}
			if cfg.DatabaseURL != tt.env["DATABASE_URL"] {
				t.Errorf("DatabaseURL = %q", cfg.DatabaseURL)
			}
		})
	}
}

// TestHoldCarriesCaptureAndExpiry: a hold's TransferenciaAnalisada carries
// the request's captura and expiraEm (CONTRACTS.md section 9), which the
// ledger needs to reserve instead of posting and which the request's
// authorization covers.
func TestHoldCarriesCaptureAndExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1)
	h.start(risk.DefaultConfig())
	hold := request("CC-HOLD", 30_000)
	hold.Capture, hold.ExpiresAt = events.CaptureManual, hold.OccurredAt.Add(time.Hour)
	h.produce(hold, nil)
	h.settle()

	analysed := h.list(h.topics.Analysed)
	if len(analysed) != 1 {
		t.Fatalf("%d records on the analysed topic, want 1", len(analysed))
	}
	var got events.Analysed
	if err := json.Unmarshal(analysed[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	if got.Capture != events.CaptureManual || !got.ExpiresAt.Equal(hold.ExpiresAt) {
		t.Errorf("captura %q, expiraEm %v; want %s, %v", got.Capture, got.ExpiresAt, events.CaptureManual, hold.ExpiresAt)
	}
}
