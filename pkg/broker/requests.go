package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests counts the requests every franz-go client of the process sends
// to the brokers, by request type (Produce, Fetch, OffsetCommit,
// Heartbeat...): kafka_client_requests_total. Divided by the records that
// flowed, it tells what one record costs the broker in round trips, which
// at low rates is most of the broker's work. platform.NewRegistry
// registers it; it counts whether or not it is registered.
var Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kafka_client_requests_total",
	Help: "Requests sent to Kafka brokers by this process's clients, by request type.",
}, []string{"request"})

// requestCounter is the kgo hook behind Requests.
type requestCounter struct{}

var _ kgo.HookBrokerWrite = requestCounter{}

func (requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		Requests.WithLabelValues(kmsg.NameForKey(key)).Inc()
	}
}
