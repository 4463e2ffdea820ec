package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminTimeout bounds one admin request to one node.
const adminTimeout = 3 * time.Second

// askNode sends req to the node at addr itself (not to whichever broker
// the metadata names), so a dead or hung node elsewhere does not delay it.
func askNode(addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no seed broker")
	}
	return seeds[0].Request(ctx, req)
}

// brokersSeen is the number of brokers node addr lists in its metadata.
func brokersSeen(addr string) (int, error) {
	resp, err := askNode(addr, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return 0, err
	}
	return len(resp.(*kmsg.MetadataResponse).Brokers), nil
}

// ask sends req to each running node that is not stopped until one answers.
func (c *KafkaCluster) ask(req kmsg.Request) (kmsg.Response, error) {
	errs := []error{errors.New("no running node")}
	for _, nd := range c.nodes {
		if nd.doneChan() == nil || nd.isStopped() {
			continue
		}
		resp, err := askNode(nd.addr(), req)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", nd.id, err))
	}
	return nil, errors.Join(errs...)
}

// Partition is what a live node's metadata says of topic's partition:
// its leader's node id and the in-sync replicas. The metadata may still
// name a node killed moments ago (until its session times out): callers
// that wait for a new leader poll.
func (c *KafkaCluster) Partition(topic string, partition int) (leader int, isr []int, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := c.ask(req)
	if err != nil {
		return -1, nil, err
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return -1, nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		for _, p := range t.Partitions {
			if int(p.Partition) != partition {
				continue
			}
			for _, r := range p.ISR {
				isr = append(isr, int(r))
			}
			if p.Leader < 0 {
				return -1, isr, fmt.Errorf("%s/%d: no leader", topic, partition)
			}
			return int(p.Leader), isr, nil
		}
	}
	return -1, nil, fmt.Errorf("%s/%d: not in the metadata", topic, partition)
}

// Leader is the node id of topic's partition leader (see Partition).
func (c *KafkaCluster) Leader(topic string, partition int) (int, error) {
	leader, _, err := c.Partition(topic, partition)
	return leader, err
}

// Controller is the node id of the active controller: the leader of the
// KRaft metadata quorum (DescribeQuorum; the controller id a Metadata
// response gives clients in KRaft is any broker, not the active one).
func (c *KafkaCluster) Controller() (int, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.ask(req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return -1, err
	}
	if len(r.Topics) == 0 || len(r.Topics[0].Partitions) == 0 {
		return -1, errors.New("DescribeQuorum: no partition in the answer")
	}
	p := r.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return -1, err
	}
	if p.LeaderID < 0 {
		return -1, errors.New("the metadata quorum has no leader")
	}
	return int(p.LeaderID), nil
}
