//go:build cluster

package cluster_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/test/cluster"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// producer writes numbered records one at a time with the suite's writer
// (acks=all), retrying a failed write as the outbox relay does, and
// remembers which numbers were acknowledged and the longest time between
// two acknowledgements.
type producer struct {
	w        *kafkatest.Writer
	topic    string
	next     int
	acked    map[string]bool
	lastAck  time.Time
	maxPause time.Duration
}

func newProducer(t *testing.T, c *cluster.KafkaCluster, topic string) *producer {
	w := kafkatest.NewWriter(t, broker.Config{Brokers: c.Brokers()})
	t.Cleanup(func() { _ = w.Close() })
	return &producer{w: w, topic: topic, acked: map[string]bool{}, lastAck: time.Now()}
}

// write sends n records, each retried until acknowledged or until within
// has passed since the last acknowledgement.
func (p *producer) write(t *testing.T, n int, within time.Duration) {
	t.Helper()
	for range n {
		v := strconv.Itoa(p.next)
		p.next++
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := p.w.WriteMessages(ctx, kafka.Message{Topic: p.topic, Key: []byte("k"), Value: []byte(v)})
			cancel()
			if err == nil {
				now := time.Now()
				p.maxPause = max(p.maxPause, now.Sub(p.lastAck))
				p.lastAck = now
				p.acked[v] = true
				break
			}
			if time.Since(p.lastAck) > within {
				t.Fatalf("no write acknowledged for %v: %v", within, err)
			}
		}
	}
}

// readAll reads every record of partition 0 of topic from any node.
func readAll(t *testing.T, c *cluster.KafkaCluster, topic string, want int) map[string]bool {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Brokers(), Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond})
	defer func() { _ = r.Close() }()
	got := map[string]bool{}
	for len(got) < want {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		m, err := r.ReadMessage(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read back %s after %d of %d records: %v", topic, len(got), want, err)
		}
		got[string(m.Value)] = true
	}
	return got
}

// waitLeaderNot waits until the metadata names a live leader other than
// gone for topic's partition 0 and returns it.
func waitLeaderNot(t *testing.T, c *cluster.KafkaCluster, topic string, gone int) int {
	t.Helper()
	leader := -1
	poll.Until(t, time.Minute, "a new leader of "+topic+"/0", func() (bool, string) {
		l, err := c.Leader(topic, 0)
		if err != nil {
			return false, err.Error()
		}
		leader = l
		return l != gone, fmt.Sprintf("leader %d", l)
	})
	return leader
}

// Three nodes with the production settings: a topic created as the suite
// creates them is RF 3 with min ISR 2; a SIGKILL of the partition leader
// under acks=all writes pauses them for about the session timeout and
// loses none; with two nodes down no write is acknowledged; the
// active controller's loss elects another; a SIGSTOPped leader is
// replaced and rejoins after SIGCONT.
func TestKafkaClusterFailover(t *testing.T) {
	c := cluster.StartKafka(t, "", 3)
	t.Logf("FIGURE kafka cluster of 3 serving %v after launch", c.Started.Round(100*time.Millisecond))

	const topic = "cluster-failover"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, broker.Config{Brokers: c.Brokers()},
		[]broker.TopicSpec{{Name: topic, Partitions: 1, ReplicationFactor: 3}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, "3 in-sync replicas", func() (bool, string) {
		_, isr, err := c.Partition(topic, 0)
		return err == nil && len(isr) == 3, fmt.Sprintf("isr %v, %v", isr, err)
	})
	checkTopicConfig(t, c, topic)

	p := newProducer(t, c, topic)
	p.write(t, 200, 30*time.Second)
	p.maxPause = 0

	// The partition leader crashes.
	leader, err := c.Leader(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.lastAck = time.Now()
	c.Kill(leader)
	p.write(t, 300, time.Minute)
	t.Logf("FIGURE acks=all write pause after SIGKILL of the partition leader (node %d): %v", leader, p.maxPause.Round(10*time.Millisecond))
	if p.maxPause > 30*time.Second {
		t.Errorf("writes paused %v after a leader kill; want under 30 s", p.maxPause)
	}
	newLeader := waitLeaderNot(t, c, topic, leader)

	// A second node down: one replica left. Nothing may be acknowledged.
	// With every node a controller too, two of three down is also the
	// KRaft quorum lost: no leader can be elected, so the writes fail for
	// that reason before min.insync.replicas is reached.
	c.Kill(newLeader)
	refused := 0
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := p.w.WriteMessages(ctx, kafka.Message{Topic: topic, Key: []byte("k"), Value: []byte("refused-" + strconv.Itoa(i))})
		cancel()
		if err == nil {
			t.Errorf("a write was acknowledged with one replica left (min ISR 2)")
			continue
		}
		refused++
		t.Logf("with one replica left: %v", err)
	}
	if refused == 0 {
		t.Error("no write refused with one replica left")
	}
	c.Start(leader)
	c.Start(newLeader)
	poll.Until(t, 2*time.Minute, "3 in-sync replicas again", func() (bool, string) {
		_, isr, err := c.Partition(topic, 0)
		return err == nil && len(isr) == 3, fmt.Sprintf("isr %v, %v", isr, err)
	})
	p.write(t, 100, time.Minute)
	got := readAll(t, c, topic, len(p.acked))
	for v := range p.acked {
		if !got[v] {
			t.Errorf("acknowledged record %s lost", v)
		}
	}
	t.Logf("%d acknowledged records, all read back", len(p.acked))

	// The active controller crashes: another takes over.
	ctrl, err := c.Controller()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	c.Kill(ctrl)
	poll.Until(t, time.Minute, "a new active controller", func() (bool, string) {
		n, err := c.Controller()
		return err == nil && n != ctrl, fmt.Sprintf("controller %d, %v", n, err)
	})
	t.Logf("FIGURE new active controller %v after SIGKILL of controller node %d", time.Since(began).Round(10*time.Millisecond), ctrl)
	p.lastAck, p.maxPause = time.Now(), 0
	p.write(t, 50, time.Minute)
	c.Start(ctrl)

	// The partition leader hangs (SIGSTOP): it is replaced, and after
	// SIGCONT it rejoins as a follower.
	leader = waitLeaderNot(t, c, topic, -1)
	p.lastAck, p.maxPause = time.Now(), 0
	c.Stop(leader)
	p.write(t, 100, time.Minute)
	t.Logf("FIGURE acks=all write pause after SIGSTOP of the partition leader (node %d): %v", leader, p.maxPause.Round(10*time.Millisecond))
	c.Cont(leader)
	poll.Until(t, 2*time.Minute, "the resumed node back in sync", func() (bool, string) {
		_, isr, err := c.Partition(topic, 0)
		return err == nil && len(isr) == 3, fmt.Sprintf("isr %v, %v", isr, err)
	})
	got = readAll(t, c, topic, len(p.acked))
	for v := range p.acked {
		if !got[v] {
			t.Errorf("acknowledged record %s lost", v)
		}
	}
}

// checkTopicConfig reads the topic's and a broker's settings back.
func checkTopicConfig(t *testing.T, c *cluster.KafkaCluster, topic string) {
	t.Helper()
	kc := &kafka.Client{Addr: kafka.TCP(c.Brokers()...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := kc.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"min.insync.replicas", "unclean.leader.election.enable"}},
		{ResourceType: kafka.ResourceTypeBroker, ResourceName: "1", ConfigNames: []string{"default.replication.factor", "min.insync.replicas", "offsets.topic.replication.factor", "transaction.state.log.min.isr"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false",
		"default.replication.factor": "3", "offsets.topic.replication.factor": "3", "transaction.state.log.min.isr": "2"}
	for _, r := range res.Resources {
		for _, e := range r.ConfigEntries {
			if w, ok := want[e.ConfigName]; ok && e.ConfigValue != w {
				t.Errorf("%s: %s = %s, want %s", r.ResourceName, e.ConfigName, e.ConfigValue, w)
			}
		}
	}
}
