package kafkatest

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/paysuite/payments/test/support/dockertest"
)

const (
	containerPort   = "9092/tcp"
	containerScript = "/tmp/paysuite_start.sh"
)

// startContainer starts ContainerImage as a single KRaft node and returns
// its address. The container serves the whole test process; testcontainers'
// reaper (Ryuk) removes it when the process exits.
//
// testcontainers-go's kafka module (v0.44, the newest the Go proxy serves)
// only drives Confluent images, so this uses the generic API the way
// testcontainers-java drives apache/kafka: the container waits for a start
// script that is copied in once the mapped port is known, because the
// advertised listener must name the host's port.
func startContainer(ctx context.Context) (addrs []string, err error) {
	if err := dockertest.Healthy(ctx); err != nil {
		return nil, fmt.Errorf("no Docker engine: %w", err)
	}
	c, err := testcontainers.Run(ctx, ContainerImage,
		testcontainers.WithExposedPorts(containerPort),
		testcontainers.WithEnv(map[string]string{
			"CLUSTER_ID":                                     "4L6g3nShT-eMCtK--X86sw",
			"KAFKA_NODE_ID":                                  "1",
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_LISTENERS":                                "PLAINTEXT://0.0.0.0:9092,BROKER://0.0.0.0:9093,CONTROLLER://0.0.0.0:9094",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":               "BROKER",
			"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9094",
			"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                "false",
			"KAFKA_NUM_PARTITIONS":                           "1",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
			"KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS":             "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
		}),
		testcontainers.WithEntrypoint("sh"),
		testcontainers.WithCmd("-c", "while [ ! -f "+containerScript+" ]; do sleep 0.1; done; exec sh "+containerScript),
		testcontainers.WithLifecycleHooks(testcontainers.ContainerLifecycleHooks{
			PostStarts: []testcontainers.ContainerHook{
				func(ctx context.Context, c testcontainers.Container) error {
					if err := wait.ForMappedPort(containerPort).WaitUntilReady(ctx, c); err != nil {
						return fmt.Errorf("wait for mapped port: %w", err)
					}
					endpoint, err := c.PortEndpoint(ctx, containerPort, "")
					if err != nil {
						return err
					}
					script := "export KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://" + endpoint + ",BROKER://$(hostname):9093\n" +
						"exec /etc/kafka/docker/run\n"
					if err := c.CopyToContainer(ctx, []byte(script), containerScript, 0o755); err != nil {
						return fmt.Errorf("copy start script: %w", err)
					}
					return wait.ForLog("Kafka Server started").WithStartupTimeout(3*time.Minute).WaitUntilReady(ctx, c)
				},
			},
		}),
	)
	if err != nil {
		if c != nil {
			_ = c.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("start %s: %w", ContainerImage, err)
	}
	endpoint, err := c.PortEndpoint(ctx, containerPort, "")
	if err != nil {
		return nil, err
	}
	probe := &kafka.Client{Addr: kafka.TCP(endpoint), Timeout: 10 * time.Second}
	for {
		if _, err := probe.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}}); err == nil {
			return []string{endpoint}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("container %s started but serves no metadata: %w", ContainerImage, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
