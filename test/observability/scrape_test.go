package observability

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/test/support/poll"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metrics is one scrape of /metrics, parsed.
type metrics map[string]*dto.MetricFamily

// scrape GETs baseURL/metrics and parses the text exposition format.
func scrape(ctx context.Context, baseURL string) (metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
		return nil, fmt.Errorf("GET /metrics: %d %s", res.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return fams, nil
}

// mustScrape is scrape failing the test on error.
func mustScrape(tb testing.TB, baseURL string) metrics {
	tb.Helper()
	m, err := scrape(context.Background(), baseURL)
	if err != nil {
		tb.Fatalf("scrape %s: %v", baseURL, err)
	}
	return m
}

// labelsOf returns the labels of a series as a map.
func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// labelNames returns the sorted label names of a series.
func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	sort.Strings(out)
	return out
}

func matches(m *dto.Metric, want map[string]string) bool {
	got := labelsOf(m)
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// sum adds up the series of name whose labels include match: counter and
// gauge values, histogram sample counts. ok is false when no series matched.
func (ms metrics) sum(name string, match map[string]string) (total float64, ok bool) {
	f := ms[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !matches(m, match) {
			continue
		}
		ok = true
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			total += m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			total += m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			total += float64(m.GetHistogram().GetSampleCount())
		default:
			total += m.GetUntyped().GetValue()
		}
	}
	return total, ok
}

// value is sum with a missing series counting as zero.
func (ms metrics) value(name string, match map[string]string) float64 {
	v, _ := ms.sum(name, match)
	return v
}

// series describes the series of name, for failure messages.
func (ms metrics) series(name string) string {
	f := ms[name]
	if f == nil {
		return name + ": absent"
	}
	var parts []string
	for _, m := range f.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		v, _ := metrics{name: &dto.MetricFamily{Type: f.Type, Metric: []*dto.Metric{m}}}.sum(name, nil)
		parts = append(parts, fmt.Sprintf("{%s} %g", strings.Join(ls, ","), v))
	}
	return name + " " + strings.Join(parts, " ")
}

// waitMetrics polls baseURL/metrics until cond holds on a scrape.
func waitMetrics(tb testing.TB, baseURL string, timeout time.Duration, desc string, cond func(metrics) (bool, string)) metrics {
	tb.Helper()
	var last metrics
	poll.Until(tb, timeout, desc, func() (bool, string) {
		m, err := scrape(context.Background(), baseURL)
		if err != nil {
			return false, err.Error()
		}
		last = m
		return cond(m)
	})
	return last
}
