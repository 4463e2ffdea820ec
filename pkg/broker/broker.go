// Package broker is the one place where the suite configures its Kafka
// clients: the kafka-go writer every producer uses, the franz-go (kgo)
// consumer-group, partition and admin clients every consumer and the DLT
// tooling use (read_committed, see kgo.go), and the provisioning of the
// topics of CONTRACTS.md.
//
// kafka-go's Writer defaults are unsafe for payments (round-robin balancer
// that ignores keys, no acks, a 1 s batch timeout), so NewWriter sets the
// balancer, acks and batch timeout explicitly.
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
	Brokers []string `env:"KAFKA_BROKERS" envDefault:"localhost:9092" help:"comma-separated bootstrap brokers"`
	// Dial replaces the default dialer when set (tests).
	Dial DialFunc `env:"-"`
	// MaxMessageBytes is the largest record the writer sends; default
	// 1 MiB, the broker's default message.max.bytes.
	MaxMessageBytes int64 `env:"KAFKA_MAX_MESSAGE_BYTES" envDefault:"1048576" help:"largest record a producer sends"`
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

// NewWriter returns the writer every producer of the suite uses:
//   - acks from all in-sync replicas (RequireAll);
//   - partition by murmur2 of the key, as the Java client does, so Go and
//     Java producers put an account's events on the same partition;
//   - a 2 ms batch timeout (the default 1 s would add a second of latency to
//     every synchronous send);
//   - a batch size of batch records, the most one call sends (the relay's
//     claim size), so that the records of one call for one partition form one
//     record batch, which the broker appends or refuses as a whole: the
//     outbox relies on that for per-key order. No larger: kafka-go allocates
//     a batch's whole capacity for every partition a call touches (152 bytes
//     a record), and a capacity of 10,000 cost each service a fifth of its
//     CPU in allocation and GC under load (bench-e2e -profile);
//   - no topic auto-creation: topics are provisioned with their settings.
//
// The topic is set per message. The caller closes the writer.
func NewWriter(cfg Config, batch int) *kafka.Writer {
	return newWriter(cfg, &kafka.Murmur2Balancer{}, batch)
}

// NewDLTWriter is NewWriter for dead-letter and retry records, which are
// sent one per call: each goes to the partition number its message names
// (the original record's, as Spring's DeadLetterPublishingRecoverer does)
// when the target topic has that partition, and by murmur2 of its key
// otherwise. The caller closes it.
func NewDLTWriter(cfg Config) *kafka.Writer {
	return newWriter(cfg, SamePartition{}, 1)
}

// SamePartition is a balancer that keeps a message on the partition it
// names (kafka.Message.Partition) when the topic has it, and otherwise
// partitions by murmur2 of the key as the Java client does.
type SamePartition struct{}

// Balance implements kafka.Balancer.
func (SamePartition) Balance(msg kafka.Message, partitions ...int) int {
	if slices.Contains(partitions, msg.Partition) {
		return msg.Partition
	}
	return kafka.Murmur2Balancer{Consistent: true}.Balance(msg, partitions...)
}

func newWriter(cfg Config, balancer kafka.Balancer, batch int) *kafka.Writer {
	maxBytes := cfg.maxMessageBytes()
	return &kafka.Writer{
		Addr:                   kafka.TCP(cfg.Brokers...),
		Balancer:               balancer,
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           2 * time.Millisecond,
		BatchSize:              max(batch, 1),
		BatchBytes:             maxBytes * 16,
		MaxAttempts:            3,
		WriteBackoffMin:        50 * time.Millisecond,
		WriteBackoffMax:        500 * time.Millisecond,
		ReadTimeout:            10 * time.Second,
		WriteTimeout:           10 * time.Second,
		AllowAutoTopicCreation: false,
		Transport:              cfg.Transport(),
	}
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

// SuiteTopics lists every topic of CONTRACTS.md section 3 for names t, with
// 12 partitions and replication factor rf.
func SuiteTopics(t events.Topics, rf int) []TopicSpec {
	names := []string{t.Requested, t.Analysed, t.Settled, t.Rejected,
		events.DLT(t.Requested), events.DLT(t.Analysed)}
	for _, main := range []string{t.Settled, t.Rejected} {
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

// Header returns the value of the last header named key, or "".
func Header(m kafka.Message, key string) string {
	for i := len(m.Headers) - 1; i >= 0; i-- {
		if m.Headers[i].Key == key {
			return string(m.Headers[i].Value)
		}
	}
	return ""
}

// DefaultAddr is the broker every component and command uses when
// KAFKA_BROKERS is not set: a local development broker.
const DefaultAddr = "localhost:9092"

// Publisher sends records to Kafka; *kafka.Writer (NewWriter, NewDLTWriter)
// is the production one. WriteMessages returns nil when every record was
// acknowledged, or kafka.WriteErrors (aligned with msgs) or another error.
// The outbox relay, the consumer loop (retry topics and DLTs) and the DLT
// replay all publish through it.
type Publisher interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// SetHeader replaces (or adds) the header named key.
func SetHeader(hs []kafka.Header, key, value string) []kafka.Header {
	out := hs[:0:0]
	for _, h := range hs {
		if h.Key != key {
			out = append(out, h)
		}
	}
	return append(out, kafka.Header{Key: key, Value: []byte(value)})
}

// Ping makes one ApiVersions round trip over w's transport, to the
// bootstrap brokers: it reuses the connection the transport keeps (TCP,
// TLS and SASL done once, redone only after that connection broke), so a
// readiness probe that calls it every second opens no connection of its
// own. A wrong password or an untrusted certificate fails it as it fails
// the writer.
func Ping(ctx context.Context, w *kafka.Writer) error {
	client := &kafka.Client{Addr: w.Addr, Transport: w.Transport}
	res, err := client.ApiVersions(ctx, &kafka.ApiVersionsRequest{})
	if err != nil {
		return err
	}
	return res.Error
}
