package dlt_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
)

// A DLT written by a transactional producer (a Spring application's
// recoverer can be one): List shows the committed records only, no marker
// and no aborted record, stops at a transaction still open, and does not
// wait at a partition that ends with a marker.
func TestListReadsCommitted(t *testing.T) {
	t.Parallel()
	cfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	topic := kafkatest.Topic(t, "dlt.txn", 1)
	prod := kafkatest.NewProducer(t)
	msg := func(id string) kafka.Message {
		return kafka.Message{Topic: topic, Key: []byte("K"), Value: []byte(id),
			Headers: []kafka.Header{{Key: events.HeaderEventID, Value: []byte(id)}}}
	}
	prod.Plain(msg("plain-1"))
	prod.Committed(msg("committed-1"), msg("committed-2"))
	prod.Aborted(msg("aborted-1"))
	prod.Plain(msg("plain-2"))
	prod.Committed(msg("committed-3"))

	tests := []struct {
		name string
		// open leaves a transaction open before listing.
		open bool
		want []string
	}{
		{name: "ends with a commit marker", want: []string{"plain-1", "committed-1", "committed-2", "plain-2", "committed-3"}},
		{name: "an open transaction at the end", open: true, want: []string{"plain-1", "committed-1", "committed-2", "plain-2", "committed-3"}},
	}
	// The cases run in order: the second leaves a transaction open.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.open {
				prod.Begin()
				prod.InTxn(msg("open-1"))
				prod.Plain(msg("after-open"))
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			recs, err := dlt.List(ctx, cfg, dlt.Filter{Topic: topic})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			// Waiting out the idle timeout would mean List did not see
			// the end of the partition.
			if took := time.Since(start); took > 4*time.Second {
				t.Errorf("List took %v", took)
			}
			if diff := cmp.Diff(tt.want, ids(recs)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}
