// Package kafkatest gives tests a real Kafka broker, unique topics and
// consumer groups on it, an in-process fake for fast unit tests, and a dial
// function that can cut one client off the broker.
//
// The broker is, in order of preference:
//
//  1. TEST_KAFKA_BROKERS, comma-separated host:port (make test starts a
//     throwaway Kafka 4.3.1 and sets it);
//  2. an apache/kafka:4.3.1 container started once per test process with
//     testcontainers-go, if a Docker engine answers;
//  3. none: the test fails and says how to get one. It never skips.
//
// Tests share the broker, so each test makes its own topics with [Topic] and
// its own consumer groups with [Group]; nothing a test does is visible to
// another. To make the broker "go down" for one client only, give that
// client a [Dialer] and call [Dialer.Down].
//
// [Fake] is franz-go's kfake, an in-process imitation of a broker: it is for
// fast unit tests only and is NOT a real broker (see its doc).
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// EnvBrokers names the variable holding the brokers tests use.
const EnvBrokers = "TEST_KAFKA_BROKERS"

// ContainerImage is the image started when EnvBrokers is unset and a Docker
// engine is available.
const ContainerImage = "apache/kafka:4.3.1"

var (
	brokersOnce sync.Once
	brokers     []string
	brokersErr  error
)

// Brokers returns the addresses of the shared real broker, starting a
// container first if EnvBrokers is unset (once per test process).
func Brokers(tb testing.TB) []string {
	tb.Helper()
	brokersOnce.Do(func() {
		if v := os.Getenv(EnvBrokers); v != "" {
			for _, b := range strings.Split(v, ",") {
				if b = strings.TrimSpace(b); b != "" {
					brokers = append(brokers, b)
				}
			}
			if len(brokers) == 0 {
				brokersErr = fmt.Errorf("%s=%q lists no broker", EnvBrokers, v)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		brokers, brokersErr = startContainer(ctx)
		if brokersErr != nil {
			brokersErr = fmt.Errorf("%s is unset and no Kafka container could be started: %w", EnvBrokers, brokersErr)
		}
	})
	if brokersErr != nil {
		tb.Fatalf("kafkatest: no Kafka broker: %v\n"+
			"\tRun the tests with `make test`, which starts a throwaway Kafka and PostgreSQL,\n"+
			"\tor point %s at a Kafka 4.x broker with auto topic creation off, e.g.\n"+
			"\t%s=127.0.0.1:9092 go test ./...",
			brokersErr, EnvBrokers, EnvBrokers)
	}
	return append([]string(nil), brokers...)
}

var (
	clientOnce sync.Once
	client     *kafka.Client
)

// adminClient returns the client that creates and deletes topics, shared by
// the tests of the process.
//
// It goes through kafka.DefaultTransport on purpose. A kafka-go Transport
// answers metadata requests from a cache it refreshes every MetadataTTL (6 s
// by default), so a Writer on a Transport that has not seen a topic being
// created fails with "Unknown Topic Or Partition" for up to 6 s. Creating the
// topic through the default Transport refreshes the cache every client with
// a nil Transport shares.
func adminClient(tb testing.TB) *kafka.Client {
	tb.Helper()
	addrs := Brokers(tb)
	clientOnce.Do(func() {
		client = &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 30 * time.Second}
	})
	return client
}

// Topic creates a topic with the given number of partitions (replication
// factor 1) on the real broker, waits until every partition has a leader,
// and returns its name: base, a dash and a random suffix, so parallel tests
// and repeated runs never share one. The topic is deleted when the test ends.
//
// Clients with a nil Transport (kafka.DefaultTransport) and Readers see the
// topic at once. A kafka.Transport of your own that was already used before
// Topic was called serves cached metadata and may not see the topic for up to
// its MetadataTTL: create topics first, clients second.
func Topic(tb testing.TB, base string, partitions int) string {
	tb.Helper()
	name := uniqueName(base, 200)
	createExact(tb, name, partitions, nil)
	return name
}

// waitForLeaders asks c's broker until topic shows partitions partitions,
// each with a leader. It asks on a connection of its own: c's Transport would
// answer from its metadata cache.
func waitForLeaders(ctx context.Context, c *kafka.Client, topic string, partitions int) error {
	addr := c.Addr.String()
	if i := strings.IndexByte(addr, ','); i >= 0 {
		addr = addr[:i]
	}
	var last error
	for {
		last = leadersReady(ctx, addr, topic, partitions)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func leadersReady(ctx context.Context, addr, topic string, partitions int) error {
	conn, err := kafka.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		return err
	}
	if len(parts) != partitions {
		return fmt.Errorf("metadata shows %d of %d partitions", len(parts), partitions)
	}
	for _, p := range parts {
		if p.Error != nil || p.Leader.Host == "" {
			return fmt.Errorf("partition %d has no leader yet (%v)", p.ID, p.Error)
		}
	}
	return nil
}

// Group returns a consumer group id no other test uses: base, a dash and a
// random suffix.
func Group(tb testing.TB, base string) string {
	tb.Helper()
	return uniqueName(base, 200)
}

// uniqueName makes base valid as a Kafka topic or group name (letters,
// digits, '.', '_', '-'; at most 249 characters), cuts it to max characters
// and appends a dash and 8 random hex digits.
func uniqueName(base string, max int) string {
	var b strings.Builder
	for _, r := range base {
		if b.Len() >= max {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		b.WriteString("test")
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails on supported platforms
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(rnd[:]))
	return b.String()
}
