package ui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/paysuite/payments/pkg/periodic"
)

// chartWindow is how far back the Backlogs charts look.
const chartWindow = 15 * time.Minute

// sample is one reading of one service's /metrics.
type sample struct {
	at time.Time
	// pending is outbox_pending_events; lag is consumer_lag summed per
	// group; dlt is consumer_dlt_records_total summed per origin topic.
	pending float64
	lag     map[string]float64
	dlt     map[string]float64
}

// sampler reads every service's /metrics (public, no token) at an
// interval and keeps the last chartWindow of readings per service in a
// ring buffer, for the Backlogs charts.
type sampler struct {
	every time.Duration
	ups   []Upstream
	http  *http.Client

	mu   sync.Mutex
	ring map[string][]sample // per service, oldest first, bounded
	size int
}

func newSampler(every time.Duration, ups []Upstream) *sampler {
	return &sampler{every: every, ups: ups, http: &http.Client{Timeout: 3 * time.Second},
		ring: map[string][]sample{}, size: max(int(chartWindow/every), 2)}
}

// run samples until ctx ends.
func (s *sampler) run(ctx context.Context) {
	sample := func() {
		for _, u := range s.ups {
			if sm, err := s.read(ctx, u); err == nil {
				s.add(u.Name, sm)
			}
		}
	}
	sample()
	periodic.Every(ctx, periodic.Fixed(s.every), sample)
}

func (s *sampler) add(service string, sm sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := append(s.ring[service], sm)
	if len(r) > s.size {
		r = r[len(r)-s.size:]
	}
	s.ring[service] = r
}

func (s *sampler) read(ctx context.Context, u Upstream) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(u.URL, "/")+"/metrics", nil) //nolint:gosec // configured base URL, fixed path
	if err != nil {
		return sample{}, err
	}
	resp, err := s.http.Do(req) //nolint:gosec // see above
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("%s /metrics: %d", u.Name, resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, 8<<20), time.Now())
}

// parseMetrics reads the figures the charts need from the text format.
func parseMetrics(r io.Reader, at time.Time) (sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return sample{}, fmt.Errorf("parse metrics: %w", err)
	}
	sm := sample{at: at, lag: map[string]float64{}, dlt: map[string]float64{}}
	if f := fams["outbox_pending_events"]; f != nil {
		for _, m := range f.GetMetric() {
			sm.pending += m.GetGauge().GetValue()
		}
	}
	if f := fams["consumer_lag"]; f != nil {
		for _, m := range f.GetMetric() {
			sm.lag[label(m, "group")] += m.GetGauge().GetValue()
		}
	}
	if f := fams["consumer_dlt_records_total"]; f != nil {
		for _, m := range f.GetMetric() {
			sm.dlt[label(m, "topic")] += m.GetCounter().GetValue()
		}
	}
	return sm, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Chart is one small line chart: the SVG polyline's points in a 300x60
// box, and the latest value.
type Chart struct {
	Title  string
	Points string
	Latest string
}

// Lag is one consumer group's latest lag.
type Lag struct {
	Group string
	Lag   int64
}

// Metrics is what the Backlogs page shows of one service's samples.
type Metrics struct {
	Lags   []Lag
	Charts []Chart
}

// metrics returns the charts and latest lags of service.
func (s *sampler) metrics(service string) *Metrics {
	s.mu.Lock()
	r := append([]sample(nil), s.ring[service]...)
	s.mu.Unlock()
	if len(r) == 0 {
		return nil
	}
	last := r[len(r)-1]
	out := &Metrics{}
	groups := make([]string, 0, len(last.lag))
	for g := range last.lag {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		out.Lags = append(out.Lags, Lag{Group: g, Lag: int64(last.lag[g])})
	}
	out.Charts = append(out.Charts, chart("Pending outbox events", r, func(sm sample) float64 { return sm.pending }))
	out.Charts = append(out.Charts, chart("Consumer lag (all groups)", r, func(sm sample) float64 {
		var sum float64
		for _, v := range sm.lag {
			sum += v
		}
		return sum
	}))
	out.Charts = append(out.Charts, chart("Records sent to a DLT (since start)", r, func(sm sample) float64 {
		var sum float64
		for _, v := range sm.dlt {
			sum += v
		}
		return sum
	}))
	return out
}

// chart draws v over the samples: x by time across chartWindow ending at
// the last sample, y scaled to the largest value.
func chart(title string, r []sample, v func(sample) float64) Chart {
	end := r[len(r)-1].at
	start := end.Add(-chartWindow)
	top := 1.0
	for _, sm := range r {
		top = max(top, v(sm))
	}
	var b strings.Builder
	for _, sm := range r {
		x := 300 * float64(sm.at.Sub(start)) / float64(chartWindow)
		y := 58 - 56*v(sm)/top
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	return Chart{Title: title, Points: strings.TrimSpace(b.String()), Latest: fmt.Sprintf("%g", v(r[len(r)-1]))}
}
