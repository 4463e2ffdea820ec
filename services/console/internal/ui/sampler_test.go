package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseMetricsAndCharts: the figures come from the services' metric
// names (outbox pending, lag summed per group, DLT records per topic),
// and the ring buffer keeps at most 15 minutes.
func TestParseMetricsAndCharts(t *testing.T) {
	t.Parallel()
	const text = `# TYPE outbox_pending_events gauge
outbox_pending_events 3
# TYPE consumer_lag gauge
consumer_lag{group="ledger",topic="a",partition="0"} 2
consumer_lag{group="ledger",topic="a",partition="1"} 5
consumer_lag{group="ledger-dlt-monitor",topic="a-dlt",partition="0"} 0
# TYPE consumer_dlt_records_total counter
consumer_dlt_records_total{topic="a"} 1
`
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sm, err := parseMetrics(strings.NewReader(text), now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample{at: now, pending: 3, lag: map[string]float64{"ledger": 7, "ledger-dlt-monitor": 0}, dlt: map[string]float64{"a": 1}},
		sm, cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("sample mismatch (-want +got):\n%s", diff)
	}
	s := newSampler(10*time.Second, nil)
	for i := range 200 {
		sm.at = now.Add(time.Duration(i) * 10 * time.Second)
		s.add("ledger", sm)
	}
	if got := len(s.ring["ledger"]); got != 90 {
		t.Errorf("ring holds %d samples, want 90 (15 min at 10 s)", got)
	}
	m := s.metrics("ledger")
	if diff := cmp.Diff([]Lag{{Group: "ledger", Lag: 7}, {Group: "ledger-dlt-monitor", Lag: 0}}, m.Lags); diff != "" {
		t.Errorf("lags mismatch (-want +got):\n%s", diff)
	}
	if len(m.Charts) != 3 || m.Charts[0].Latest != "3" || strings.Count(m.Charts[0].Points, ",") != 90 {
		t.Errorf("charts = %+v", m.Charts)
	}
	if s.metrics("antifraud") != nil {
		t.Error("a service without samples has charts")
	}
}
