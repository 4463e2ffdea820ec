//go:build !nokfake

package suite

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// FakeKafka reports whether this build can start franz-go's kfake, the
// in-process fake broker of "payments-dev run" and "make demo" without
// KAFKA_BROKERS. The production image is built with -tags nokfake: it holds
// no fake broker.
const FakeKafka = true

// startFakeKafka starts a one-broker kfake cluster with 12 partitions per
// topic and returns its addresses and its stop function.
func startFakeKafka() ([]string, func(), error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(12))
	if err != nil {
		return nil, nil, fmt.Errorf("start kfake: %w", err)
	}
	return cluster.ListenAddrs(), cluster.Close, nil
}
