// Command kafkaready waits until a Kafka broker serves clients, so that
// test/infra/with-infra.sh starts the tests only once the broker it launched
// can answer them.
//
// A broker counts as ready when a metadata request succeeds, a probe topic
// can be created and its partition has a leader, and the group coordinator
// answers (which also creates __consumer_offsets, so the first consumer group
// of a test does not pay for it). The probe topic is deleted afterwards.
//
// Usage:
//
//	kafkaready -brokers 127.0.0.1:19092 -timeout 90s
//
// It exits 0 when ready and 1, with the last error, when the timeout passes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kafkaready:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("kafkaready", flag.ContinueOnError)
	brokers := fs.String("brokers", "127.0.0.1:19092", "comma-separated broker addresses")
	timeout := fs.Duration("timeout", 90*time.Second, "how long to wait for the broker")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addrs := strings.Split(*brokers, ",")

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	transport := &kafka.Transport{DialTimeout: 2 * time.Second, MetadataTTL: time.Second}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 5 * time.Second, Transport: transport}

	start := time.Now()
	var lastErr error
	for attempt := 1; ; attempt++ {
		lastErr = probe(ctx, client, attempt)
		if lastErr == nil {
			_, err := fmt.Fprintf(stdout, "kafkaready: %s ready after %s\n", *brokers, time.Since(start).Round(100*time.Millisecond))
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker %s not ready after %s: %w", *brokers, *timeout, lastErr)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// probe runs one readiness check; any error means "not yet".
func probe(ctx context.Context, client *kafka.Client, attempt int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return err
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no brokers")
	}

	topic := fmt.Sprintf("kafkaready-probe-%d-%d", os.Getpid(), attempt)
	created, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: 1, ReplicationFactor: 1},
	}})
	if err != nil {
		return fmt.Errorf("create probe topic: %w", err)
	}
	if err := created.Errors[topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create probe topic: %w", err)
	}
	defer func() {
		// Best effort: the broker is throwaway, a leftover probe topic harms nothing.
		_, _ = client.DeleteTopics(context.WithoutCancel(ctx), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	}()

	for {
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil &&
			len(md.Topics[0].Partitions) == 1 && md.Topics[0].Partitions[0].Leader.Host != "" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("probe topic has no leader: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}

	fc, err := client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: "kafkaready-probe", KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err != nil {
		return fmt.Errorf("find group coordinator: %w", err)
	}
	if fc.Error != nil {
		return fmt.Errorf("find group coordinator: %w", fc.Error)
	}
	return nil
}
