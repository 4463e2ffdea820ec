package consume

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
)

// UnknownOrigin labels a DLT record that lacks the origin headers.
const UnknownOrigin = "unknown"

// DLTMonitor logs every record that reaches the ledger's DLTs (analisada's,
// the command topics' and estorno.solicitado's) with its key,
// origin and cause, and counts them by origin topic (the seed's
// MonitorDeDeadLetter). It never fails: a DLT is for people to read.
type DLTMonitor struct {
	log     *slog.Logger
	records *prometheus.CounterVec
}

// NewDLTMonitor returns the monitor, counting on metrics.DLTRecords
// (nil metrics: not registered).
func NewDLTMonitor(log *slog.Logger, metrics *Metrics) *DLTMonitor {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &DLTMonitor{log: log, records: metrics.DLTRecords}
}

// Handle logs and counts DLT records (a consumer.Handler).
func (d *DLTMonitor) Handle(ctx context.Context, ms []broker.Record) error {
	for _, m := range ms {
		d.record(ctx, m)
	}
	return nil
}

func (d *DLTMonitor) record(ctx context.Context, m broker.Record) {
	// The label is the origin the headers claim only when it is the DLT's
	// own main topic: a header never widens the label set.
	origin := UnknownOrigin
	o, ok := dlt.ClaimedOrigin(m)
	if main, isDLT := events.MainOfDLT(m.Topic); ok && isDLT && o.Topic == main {
		origin = o.Topic
	}
	cause := dlt.ExceptionMessage(m)
	if cause == "" {
		cause = UnknownOrigin
	}
	d.records.WithLabelValues(origin).Inc()
	d.log.ErrorContext(ctx, "record sent to the DLT",
		"key", string(m.Key), "origin", origin, "origin_partition", o.Partition, "origin_offset", o.Offset,
		"cause", cause, "evento_id", m.Header(events.HeaderEventID),
		"dlt_partition", m.Partition, "dlt_offset", m.Offset)
}
