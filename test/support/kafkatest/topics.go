package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
)

// CreateTopic creates a topic with exactly this name (replication factor 1),
// waits for its leaders and deletes it when the test ends. Use it for names
// derived from a unique Topic, such as "<topic>-dlt" or retry topics.
func CreateTopic(tb testing.TB, name string, partitions int) {
	tb.Helper()
	createExact(tb, name, partitions, nil)
}

// TopicWithConfig is Topic with topic-level configuration (for example
// max.message.bytes), returning the unique name.
func TopicWithConfig(tb testing.TB, base string, partitions int, config map[string]string) string {
	tb.Helper()
	name := uniqueName(base, 200)
	createExact(tb, name, partitions, config)
	return name
}

// SuiteTopics creates every topic of CONTRACTS.md section 3 (main topics,
// DLTs, notification retry topics) with a unique suffix and the given number
// of partitions, deletes them when the test ends, and returns the names.
func SuiteTopics(tb testing.TB, partitions int) events.Topics {
	tb.Helper()
	t := events.DefaultTopics.WithSuffix("-" + uniqueName("t", 1)[2:])
	for _, s := range broker.SuiteTopics(t, 1) {
		createExact(tb, s.Name, partitions, nil)
	}
	return t
}

// createExact creates topic name (replication factor 1, with config),
// waits until every partition has a leader, and deletes it when the test
// ends: the broker is per run and throwaway, so a leftover harms no one.
func createExact(tb testing.TB, name string, partitions int, config map[string]string) {
	tb.Helper()
	if partitions < 1 {
		tb.Fatalf("kafkatest: topic %q with %d partitions: want at least 1", name, partitions)
	}
	c := adminClient(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tc := kafka.TopicConfig{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}
	for k, v := range config {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	res, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err == nil {
		err = res.Errors[name]
	}
	if err != nil {
		tb.Fatalf("kafkatest: create topic %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{name}})
		if err == nil {
			err = res.Errors[name]
		}
		if err != nil && !errors.Is(err, kafka.UnknownTopicOrPartition) {
			tb.Logf("kafkatest: delete topic %s: %v", name, err)
		}
	})
	if err := waitForLeaders(ctx, c, name, partitions); err != nil {
		tb.Fatalf("kafkatest: topic %s: %v", name, err)
	}
}
