package analysis

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/paysuite/payments/services/antifraud/internal/risk"
)

// Metrics count antifraud's decisions.
type Metrics struct {
	// Decisions counts new decisions by outcome (APPROVED, BLOCKED).
	Decisions *prometheus.CounterVec
	// RulesFired counts, by rule, the new decisions in which the rule
	// fired.
	RulesFired *prometheus.CounterVec
	// Duplicates counts requests that already had a decision.
	Duplicates prometheus.Counter
}

// NewMetrics creates the metrics, registered on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		Decisions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "antifraud_decisions_total", Help: "Antifraud decisions taken, by outcome (APPROVED, BLOCKED)."},
			[]string{"outcome"}),
		RulesFired: f.NewCounterVec(prometheus.CounterOpts{
			Name: "antifraud_rules_fired_total", Help: "Rules that fired in antifraud decisions, by rule."},
			[]string{"rule"}),
		Duplicates: f.NewCounter(prometheus.CounterOpts{
			Name: "antifraud_duplicate_requests_total",
			Help: "Requests that already had a decision: nothing new was stored or emitted."}),
	}
	return m
}

// init creates every series at zero, so that dashboards and rate() see
// them before the first decision.
func (m *Metrics) init(e *risk.Engine) {
	m.Decisions.WithLabelValues(string(Approved))
	m.Decisions.WithLabelValues(string(Blocked))
	for _, name := range e.RuleNames() {
		m.RulesFired.WithLabelValues(name)
	}
}

func (m *Metrics) observe(d Decision) {
	m.Decisions.WithLabelValues(string(d.Outcome)).Inc()
	for _, r := range d.Rules {
		m.RulesFired.WithLabelValues(r).Inc()
	}
}
