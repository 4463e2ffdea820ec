package dlt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
)

func TestReplayRecord(t *testing.T) {
	at := time.Date(2026, 11, 29, 22, 0, 0, 123, time.UTC)
	h := func(k, v string) broker.Header { return broker.Header{Key: k, Value: []byte(v)} }
	dead := broker.Record{
		Topic: "orders-dlt", Partition: 3, Offset: 9, Key: []byte("CC-1"), Value: []byte(`{"x":1}`),
		Headers: []broker.Header{
			h("evento-id", "e1"), h("evento-tipo", "TransferenciaLiquidada"), h("traceparent", "00-abc-def-01"),
			h("correlation-id", "t1"), h(dlt.HeaderDLTOriginalTopic, "orders"),
			{Key: dlt.HeaderDLTOriginalPartition, Value: []byte{0, 0, 0, 2}},
			{Key: dlt.HeaderDLTOriginalOffset, Value: []byte{0, 0, 0, 0, 0, 0, 0, 7}},
			h(dlt.HeaderDLTExceptionFQCN, "*errors.errorString"), h(dlt.HeaderDLTExceptionMessage, "boom"),
			{Key: dlt.HeaderRetryAttempts, Value: []byte{0, 0, 0, 4}}, h(dlt.HeaderRetryBackoffUntil, "x"),
			h("kafka_dlt-exception-stacktrace", "..."), h("kafka_exception-message", "..."),
			h(dlt.HeaderReplayed, "2026-01-01T00:00:00Z"), h(dlt.HeaderUnverified, "earlier"),
			h("custom", "kept"),
		},
	}
	rec := dlt.FromRecord(dead)
	if rec.Origin.Topic != "orders" || rec.Origin.Partition != 2 || rec.Origin.Offset != 7 || rec.Attempts != 4 {
		t.Fatalf("decoded origin %+v attempts %d", rec.Origin, rec.Attempts)
	}
	kept := []broker.Header{h("evento-id", "e1"), h("evento-tipo", "TransferenciaLiquidada"), h("traceparent", "00-abc-def-01"),
		h("correlation-id", "t1"), h("custom", "kept"), h(dlt.HeaderReplayed, "2026-11-29T22:00:00.000000123Z")}
	tests := []struct {
		name  string
		check dlt.Check
		want  broker.Record
	}{
		{name: "verified: the original headers and the replay marker", check: dlt.Check{Record: rec, Verified: true},
			want: broker.Record{Topic: "orders", Key: []byte("CC-1"), Value: []byte(`{"x":1}`), Headers: kept}},
		{name: "unverified: marked with why", check: dlt.Check{Record: rec, Problem: "no record at orders/2@7"},
			want: broker.Record{Topic: "orders", Key: []byte("CC-1"), Value: []byte(`{"x":1}`),
				Headers: append(kept[:len(kept):len(kept)], h(dlt.HeaderUnverified, "no record at orders/2@7"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, dlt.ReplayRecord(tt.check, "orders", at)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMainTopic: a DLT replays to its main topic by the naming rule, for
// the main topics the caller knows only.
func TestMainTopic(t *testing.T) {
	known := []string{"orders", "payments"}
	tests := []struct {
		dlt, want string
	}{
		{"orders-dlt", "orders"},
		{"payments-dlt", "payments"},
		{"orders", ""},
		{"-dlt", ""},
		{"other-dlt", ""},
		{"orders-retry-1000-dlt", ""},
		{"orders-dlt-dlt", ""},
	}
	for _, tt := range tests {
		got, err := dlt.MainTopic(tt.dlt, known)
		if tt.want == "" {
			if !errors.Is(err, dlt.ErrRefused) {
				t.Errorf("MainTopic(%q) = %q, %v; want ErrRefused", tt.dlt, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("MainTopic(%q) = %q, %v; want %q", tt.dlt, got, err, tt.want)
		}
	}
}

// TestReplayRefusesPlansForAnotherTopic: Replay checks the plan it is
// given again, before it publishes anything: a target other than the
// DLT's main topic, or a record naming another origin, is refused.
func TestReplayRefusesPlansForAnotherTopic(t *testing.T) {
	rec := dlt.Record{Topic: "liquidada-dlt", Key: []byte("k"), Value: []byte("v"), Origin: dlt.Origin{Topic: "liquidada"}}
	forged := rec
	forged.Origin.Topic = "analisada"
	pub := &countingPublisher{}
	for name, p := range map[string]dlt.Plan{
		"target is not the DLT's main topic": {DLT: "liquidada-dlt", Target: "analisada", Checks: []dlt.Check{{Record: rec, Verified: true}}},
		"a record names another origin":      {DLT: "liquidada-dlt", Target: "liquidada", Checks: []dlt.Check{{Record: forged, Verified: true}}},
		"a record of another DLT":            {DLT: "analisada-dlt", Target: "analisada", Checks: []dlt.Check{{Record: rec, Verified: true}}},
	} {
		if n, err := dlt.Replay(context.Background(), broker.Config{}, pub, p, dlt.Options{Unverified: true}); !errors.Is(err, dlt.ErrRefused) || n != 0 {
			t.Errorf("%s: Replay = %d, %v; want 0, ErrRefused", name, n, err)
		}
	}
	if pub.n != 0 {
		t.Errorf("%d records published", pub.n)
	}
}

type countingPublisher struct{ n int }

func (c *countingPublisher) Publish(_ context.Context, ms ...broker.Record) error {
	c.n += len(ms)
	return nil
}
