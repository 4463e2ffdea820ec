package dlt_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/dlt"
)

func TestReplayMessage(t *testing.T) {
	at := time.Date(2026, 11, 29, 22, 0, 0, 123, time.UTC)
	h := func(k, v string) kafka.Header { return kafka.Header{Key: k, Value: []byte(v)} }
	dead := kafka.Message{
		Topic: "orders-dlt", Partition: 3, Offset: 9, Key: []byte("CC-1"), Value: []byte(`{"x":1}`),
		Headers: []kafka.Header{
			h("evento-id", "e1"), h("evento-tipo", "TransferenciaLiquidada"), h("traceparent", "00-abc-def-01"),
			h("correlation-id", "t1"), h(dlt.HeaderDLTOriginalTopic, "orders"),
			{Key: dlt.HeaderDLTOriginalPartition, Value: []byte{0, 0, 0, 2}},
			{Key: dlt.HeaderDLTOriginalOffset, Value: []byte{0, 0, 0, 0, 0, 0, 0, 7}},
			h(dlt.HeaderDLTExceptionFQCN, "*errors.errorString"), h(dlt.HeaderDLTExceptionMessage, "boom"),
			{Key: dlt.HeaderRetryAttempts, Value: []byte{0, 0, 0, 4}}, h(dlt.HeaderRetryBackoffUntil, "x"),
			h("kafka_dlt-exception-stacktrace", "..."), h(dlt.HeaderReplayed, "2026-01-01T00:00:00Z"),
			h("custom", "kept"),
		},
	}
	rec := dlt.FromMessage(dead)
	if rec.Origin.Topic != "orders" || rec.Origin.Partition != 2 || rec.Origin.Offset != 7 || rec.Attempts != 4 {
		t.Fatalf("decoded origin %+v attempts %d", rec.Origin, rec.Attempts)
	}
	tests := []struct {
		name    string
		rec     dlt.Record
		want    kafka.Message
		wantErr bool
	}{
		{name: "to the original topic with the original headers", rec: rec, want: kafka.Message{
			Topic: "orders", Key: []byte("CC-1"), Value: []byte(`{"x":1}`),
			Headers: []kafka.Header{h("evento-id", "e1"), h("evento-tipo", "TransferenciaLiquidada"), h("traceparent", "00-abc-def-01"),
				h("correlation-id", "t1"), h("custom", "kept"), h(dlt.HeaderReplayed, "2026-11-29T22:00:00.000000123Z")},
		}},
		{name: "no origin", rec: dlt.FromMessage(kafka.Message{Topic: "orders-dlt", Value: []byte("x")}), wantErr: true},
		{name: "origin is the DLT", rec: func() dlt.Record {
			r := rec
			r.Origin.Topic = r.Topic
			return r
		}(), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dlt.ReplayMessage(tt.rec, at)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ReplayMessage() error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
