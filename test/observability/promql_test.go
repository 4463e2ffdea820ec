package observability

import (
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// promQL parses PromQL as Prometheus does.
var promQL = parser.NewParser(parser.Options{})

// counterFuncs take a range of a counter; gaugeFuncs a range of a gauge.
var (
	counterFuncs = []string{"rate", "irate", "increase", "resets"}
	gaugeFuncs   = []string{"deriv", "delta", "idelta", "predict_linear"}
)

// checkExpr parses expr and returns what is wrong with it: a metric no
// service exposes, a label the metric does not have, a grouping by a label
// none of the aggregated series has, or a counter function over a gauge (and
// the reverse). It also returns the metric names used.
func checkExpr(known map[string]family, expr string) (names []string, problems []string) {
	root, err := promQL.ParseExpr(expr)
	if err != nil {
		return nil, []string{fmt.Sprintf("parse: %v", err)}
	}
	parser.Inspect(root, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := selectorName(n)
			if name == "" {
				problems = append(problems, fmt.Sprintf("selector %s names no metric", n))
				return nil
			}
			names = append(names, name)
			f, ok := familyOf(known, name)
			if !ok {
				problems = append(problems, fmt.Sprintf("metric %s is exposed by no service", name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel && !slices.Contains(f.Labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
					problems = append(problems, fmt.Sprintf("%s has no label %q (labels %v)", name, m.Name, f.Labels))
				}
			}
		case *parser.AggregateExpr:
			if n.Without {
				return nil
			}
			avail := slices.Clone(targetLabels)
			for _, f := range selectorFamilies(known, n.Expr) {
				avail = append(avail, f.Labels...)
			}
			for _, g := range n.Grouping {
				if !slices.Contains(avail, g) {
					problems = append(problems, fmt.Sprintf("%s groups by %q, a label none of its series has", n.Op, g))
				}
			}
		case *parser.Call:
			for _, f := range selectorFamilies(known, n.Args) {
				switch {
				case slices.Contains(counterFuncs, n.Func.Name) && f.Type == gauge:
					problems = append(problems, fmt.Sprintf("%s over %s, a gauge: use deriv or delta", n.Func.Name, f.Name))
				case slices.Contains(gaugeFuncs, n.Func.Name) && f.Type != gauge:
					problems = append(problems, fmt.Sprintf("%s over %s, a %v: use rate or increase", n.Func.Name, f.Name, f.Type))
				}
			}
		}
		return nil
	})
	return names, problems
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// selectorFamilies returns the known families of the selectors under node.
func selectorFamilies(known map[string]family, node parser.Node) []family {
	var out []family
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if f, ok := familyOf(known, selectorName(vs)); ok {
				out = append(out, f)
			}
		}
		return nil
	})
	return out
}

// TestCheckExprFindsMistakes proves checkExpr is not a rubber stamp: each of
// these expressions has one mistake it must report.
func TestCheckExprFindsMistakes(t *testing.T) {
	known := knownFamilies()
	tests := []struct {
		name, expr string
	}{
		{"unknown metric", `outbox_pending_event > 0`},
		{"unknown label", `http_requests_total{path="/transferencias"}`},
		{"grouping by a missing label", `sum by (queue) (outbox_pending_events)`},
		{"rate over a gauge", `rate(consumer_lag[5m])`},
		{"deriv over a counter", `deriv(consumer_dlt_records_total[5m])`},
		{"syntax", `sum by (job (up)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, problems := checkExpr(known, tc.expr); len(problems) == 0 {
				t.Errorf("checkExpr(%q) found nothing wrong", tc.expr)
			}
		})
	}
	for _, ok := range []string{
		`histogram_quantile(0.99, sum by (le, job) (rate(outbox_enqueue_to_ack_seconds_bucket[5m])))`,
		`sum by (job, route) (rate(http_requests_total{route="/transferencias", status=~"5.."}[5m]))`,
		`max by (job) (outbox_oldest_pending_age_seconds)`,
		`up{job="ledger"} == 0`,
	} {
		if _, problems := checkExpr(known, ok); len(problems) > 0 {
			t.Errorf("checkExpr(%q) = %v, want no problem", ok, problems)
		}
	}
}
