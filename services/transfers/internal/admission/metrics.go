package admission

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the admission control's: what it shed, apart from the
// outage's refusals (service-unavailable), and whether it sheds now.
type Metrics struct {
	// Shed counts POST /transferencias answered 503 overloaded.
	Shed prometheus.Counter
	// Shedding is 1 while new transfers are admitted only at the fair
	// share of what the flow behind the door takes.
	Shedding prometheus.Gauge
}

// NewMetrics creates the metrics, registered on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		Shed: f.NewCounter(prometheus.CounterOpts{
			Name: "transfers_admission_shed_total",
			Help: "POST /transferencias shed at the door (503 overloaded) because the outbox relay is too far behind; outage refusals are not counted.",
		}),
		Shedding: f.NewGauge(prometheus.GaugeOpts{
			Name: "transfers_admission_shedding",
			Help: "1 while new transfers are admitted only at each client's fair share of what the outbox relay keeps up with.",
		}),
	}
}
