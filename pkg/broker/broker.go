// Package broker is the one place where the suite talks to Kafka through a
// client library: the suite's own record type (Record), the producer every
// relay and the consumer loop publish with (Producer, franz-go's idempotent
// producer), the consumer-group member every consumer loop reads with
// (Group, with Fetch and Offset), the partition reader and admin reads of
// the DLT tooling and the lag gauge (PartitionReader, Admin), all on
// franz-go and read_committed (see kgo.go), and the provisioning of the
// topics and ACLs of CONTRACTS.md (kafka-go's admin requests). No other
// package of services/ or pkg/ imports a Kafka client (imports_test.go).
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/events"
)

// DialFunc opens a connection to a broker; tests inject one to simulate an
// unreachable broker.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Config says how to reach the cluster.
type Config struct {
	// Brokers are the bootstrap brokers; default DefaultAddr.
	Brokers []string `env:"KAFKA_BROKERS" help:"comma-separated bootstrap brokers"`
	// Dial replaces the default dialer when set (tests).
	Dial DialFunc `env:"-"`
	// MaxMessageBytes is the largest record a producer sends; default
	// DefaultMaxMessageBytes.
	MaxMessageBytes int64 `env:"KAFKA_MAX_MESSAGE_BYTES" help:"largest record a producer sends"`
	// Security is the SASL credential and TLS of every connection
	// (SecuritySettings.Security); the zero value is plaintext without
	// credentials.
	Security Security `env:"-"`
}

// ParseBrokers splits a comma-separated broker list.
func ParseBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// RetryDelays are the notification retry-topic delays of CONTRACTS.md
// section 7.
var RetryDelays = []time.Duration{1000 * time.Millisecond, 2000 * time.Millisecond, 4000 * time.Millisecond}

// RetryTopic is the retry topic of topic for delay, e.g. "<topic>-retry-1000".
func RetryTopic(topic string, delay time.Duration) string {
	return topic + "-retry-" + strconv.FormatInt(delay.Milliseconds(), 10)
}

// MainTopicOf returns the one of mains that topic belongs to: topic
// itself, or the main topic of which topic is a retry topic (RetryTopic
// with one of RetryDelays); ok is false for any other topic. It names a
// record's topic from where it was read, never from its headers.
func MainTopicOf(topic string, mains ...string) (main string, ok bool) {
	for _, m := range mains {
		if topic == m {
			return m, true
		}
		for _, d := range RetryDelays {
			if topic == RetryTopic(m, d) {
				return m, true
			}
		}
	}
	return "", false
}

// TopicSpec is a topic to provision.
type TopicSpec struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	Retention         time.Duration
}

// SuiteTopics lists every topic of CONTRACTS.md sections 3, 9 and 10 for
// names t, with 12 partitions and replication factor rf: the main topics,
// the DLTs of the topics consumed with blocking retries (solicitada,
// analisada, the ledger's command topics and estorno.solicitado), and the
// retry topics and DLT of each result topic that notifications consume
// (ResultTopics).
func SuiteTopics(t events.Topics, rf int) []TopicSpec {
	names := slices.Concat(t.All(), t.Holds(), t.Refunds(), []string{events.DLT(t.Requested), events.DLT(t.Analysed),
		events.DLT(t.CaptureRequested), events.DLT(t.CancelRequested), events.DLT(t.RefundRequested)})
	for _, main := range ResultTopics(t) {
		for _, d := range RetryDelays {
			names = append(names, RetryTopic(main, d))
		}
		names = append(names, events.DLT(main))
	}
	out := make([]TopicSpec, len(names))
	for i, n := range names {
		out[i] = TopicSpec{Name: n, Partitions: 12, ReplicationFactor: rf, Retention: 7 * 24 * time.Hour}
	}
	return out
}

// ResultTopics are the topics of the results of transfers and refunds,
// which the transfers projection and notifications read: liquidada,
// rejeitada, reservada, cancelada, estorno.liquidado and
// estorno.rejeitado.
func ResultTopics(t events.Topics) []string {
	return []string{t.Settled, t.Rejected, t.Reserved, t.Cancelled, t.RefundSettled, t.RefundRejected}
}

// CreateTopics creates the topics that do not exist yet, with their
// partitions, replication factor, min.insync.replicas = min(2, RF), unclean
// leader election off and retention. Existing topics are left as they are, so running it twice
// changes nothing. It returns the names it created.
func CreateTopics(ctx context.Context, cfg Config, specs []TopicSpec) ([]string, error) {
	transport := cfg.Transport()
	transport.MetadataTTL = time.Second // waitForLeaders reads the metadata cache
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second, Transport: transport}
	req := &kafka.CreateTopicsRequest{}
	for _, s := range specs {
		rf := s.ReplicationFactor
		if rf <= 0 {
			rf = 1
		}
		entries := []kafka.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(min(2, rf))},
			// Kafka's default, set per topic so that a broker default
			// turned on cannot elect an out-of-sync replica and truncate
			// acknowledged records.
			{ConfigName: "unclean.leader.election.enable", ConfigValue: "false"}}
		if s.Retention > 0 {
			entries = append(entries, kafka.ConfigEntry{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(s.Retention.Milliseconds(), 10)})
		}
		req.Topics = append(req.Topics, kafka.TopicConfig{
			Topic: s.Name, NumPartitions: s.Partitions, ReplicationFactor: rf, ConfigEntries: entries,
		})
	}
	resp, err := client.CreateTopics(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("create topics: %w", err)
	}
	var created []string
	var errs []error
	for _, s := range specs {
		switch err := resp.Errors[s.Name]; {
		case err == nil:
			created = append(created, s.Name)
		case errors.Is(err, kafka.TopicAlreadyExists):
		default:
			errs = append(errs, fmt.Errorf("topic %s: %w", s.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return created, err
	}
	return created, waitForLeaders(ctx, client, specs)
}

// waitForLeaders waits until every partition of specs has a leader, so that
// the first writes do not race the topic creation.
func waitForLeaders(ctx context.Context, client *kafka.Client, specs []TopicSpec) error {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
		if err == nil && allLed(meta, specs) {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("partitions without leader")
			}
			return fmt.Errorf("wait for topic leaders: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func allLed(meta *kafka.MetadataResponse, specs []TopicSpec) bool {
	want := map[string]int{}
	for _, s := range specs {
		want[s.Name] = s.Partitions
	}
	got := 0
	for _, t := range meta.Topics {
		n, ok := want[t.Name]
		if !ok {
			continue
		}
		if t.Error != nil || len(t.Partitions) < n {
			return false
		}
		for _, p := range t.Partitions {
			if p.Error != nil || p.Leader.Host == "" {
				return false
			}
		}
		got++
	}
	return got == len(want)
}

// DefaultAddr is the broker every component and command uses when
// KAFKA_BROKERS is not set: a local development broker.
const DefaultAddr = "localhost:9092"

// DefaultMaxMessageBytes is KAFKA_MAX_MESSAGE_BYTES' default: 1 MiB, the
// broker's default message.max.bytes.
const DefaultMaxMessageBytes = 1 << 20
