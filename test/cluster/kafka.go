package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// KafkaJVMFlags are the JVM flags of every node: a small heap, the serial
// collector and the C1-only JIT, which start a node fastest on a busy
// 2-core machine and are plenty for tests.
var KafkaJVMFlags = []string{"-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"}

// KafkaReadyTimeout bounds the wait for a node (or the whole cluster) to
// serve after a start.
const KafkaReadyTimeout = 3 * time.Minute

// KafkaCluster is n KRaft nodes of the test's own, each a broker and a
// controller with its own ports and log directory, formatted with one
// cluster id. The ports stay the same across restarts, so clients find a
// restarted node where they left it. Nodes are named by their node id,
// 1 to n.
type KafkaCluster struct {
	tb    testing.TB
	libs  string
	dir   string
	nodes []*kafkaNode
	// Started is how long StartKafka took from the first launch until
	// every node served.
	Started time.Duration
}

type kafkaNode struct {
	id          int
	dir         string
	port, cport int

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // SIGSTOP sent, no SIGCONT since
}

// StartKafka starts an n-node cluster in dir ("" for a temp folder) and
// waits until every node serves and sees all n brokers. With n = 1 the
// node is the single voter of a dynamic quorum and every replication
// setting is 1, as `make test` runs; with n >= 3 the cluster has the
// production settings: default replication factor 3, min.insync.replicas
// 2, unclean leader election off, the internal topics at RF 3 and min
// ISR 2.
func StartKafka(tb testing.TB, dir string, n int) *KafkaCluster {
	tb.Helper()
	if n != 1 && n < 3 {
		tb.Fatalf("StartKafka: %d nodes; want 1 or at least 3 (a quorum that survives one loss)", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	libs, err := kafkatest.KafkaLibs(ctx)
	if err != nil {
		tb.Fatalf("Kafka jars: %v", err)
	}
	c := &KafkaCluster{tb: tb, libs: libs, dir: workDir(tb, dir, "paysuite-kafka-cluster-")}
	for i := 1; i <= n; i++ {
		c.nodes = append(c.nodes, &kafkaNode{id: i, dir: filepath.Join(c.dir, strconv.Itoa(i)),
			port: freePort(tb, EnvKafkaPorts), cport: freePort(tb, EnvKafkaPorts)})
	}
	tb.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.kill()
		}
	})
	id := clusterID()
	for _, nd := range c.nodes {
		if err := os.MkdirAll(nd.dir, 0o750); err != nil {
			tb.Fatal(err)
		}
		props := filepath.Join(nd.dir, "server.properties")
		if err := os.WriteFile(props, []byte(c.properties(nd)), 0o600); err != nil {
			tb.Fatal(err)
		}
		args := []string{"kafka.tools.StorageTool", "format", "-t", id, "-c", props}
		if n == 1 {
			args = append(args, "--standalone")
		}
		if out, err := c.java(args...).CombinedOutput(); err != nil {
			tb.Fatalf("format the storage of Kafka node %d: %v\n%s", nd.id, err, out)
		}
	}
	began := time.Now()
	for _, nd := range c.nodes {
		c.launch(nd)
	}
	c.WaitReady()
	c.Started = time.Since(began)
	return c
}

// clusterID is a random KRaft cluster id (16 bytes, base64url) that does
// not begin with '-', which the storage tool would read as a flag.
func clusterID() string {
	b := make([]byte, 16)
	for {
		_, _ = rand.Read(b)
		if id := base64.RawURLEncoding.EncodeToString(b); !strings.HasPrefix(id, "-") {
			return id
		}
	}
}

func (c *KafkaCluster) properties(nd *kafkaNode) string {
	var b strings.Builder
	fmt.Fprintf(&b, "process.roles=broker,controller\nnode.id=%d\n", nd.id)
	rf, minISR, internalPartitions := 1, 1, 1
	if len(c.nodes) == 1 {
		fmt.Fprintf(&b, "controller.quorum.bootstrap.servers=127.0.0.1:%d\n", nd.cport)
	} else {
		voters := make([]string, len(c.nodes))
		for i, o := range c.nodes {
			voters[i] = fmt.Sprintf("%d@127.0.0.1:%d", o.id, o.cport)
		}
		fmt.Fprintf(&b, "controller.quorum.voters=%s\n", strings.Join(voters, ","))
		rf, minISR, internalPartitions = 3, 2, 3
	}
	fmt.Fprintf(&b, `listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[3]s
num.partitions=1
default.replication.factor=%[4]d
min.insync.replicas=%[5]d
unclean.leader.election.enable=false
auto.create.topics.enable=false
delete.topic.enable=true
offsets.topic.replication.factor=%[4]d
offsets.topic.num.partitions=%[6]d
transaction.state.log.replication.factor=%[4]d
transaction.state.log.min.isr=%[5]d
transaction.state.log.num.partitions=%[6]d
share.coordinator.state.topic.replication.factor=%[4]d
share.coordinator.state.topic.min.isr=%[5]d
group.initial.rebalance.delay.ms=0
broker.session.timeout.ms=6000
broker.heartbeat.interval.ms=1000
`, nd.port, nd.cport, filepath.Join(nd.dir, "data"), rf, minISR, internalPartitions)
	return b.String()
}

func (c *KafkaCluster) java(args ...string) *exec.Cmd {
	all := append(append([]string{}, KafkaJVMFlags...), "-cp", filepath.Join(c.libs, "*"))
	cmd := exec.Command("java", append(all, args...)...) //nolint:gosec,noctx // the test's own command line; killed at cleanup
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// launch starts node nd's JVM on its formatted storage, without waiting.
func (c *KafkaCluster) launch(nd *kafkaNode) {
	c.tb.Helper()
	logf, err := os.OpenFile(filepath.Join(nd.dir, "broker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600) //nolint:gosec // the test's own log
	if err != nil {
		c.tb.Fatal(err)
	}
	cmd := c.java("kafka.Kafka", filepath.Join(nd.dir, "server.properties"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		c.tb.Fatalf("start Kafka node %d: %v", nd.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	nd.mu.Lock()
	nd.cmd, nd.done = cmd, done
	nd.mu.Unlock()
}

// WaitReady waits until every running node answers a metadata request
// listing every running node, failing the test after KafkaReadyTimeout or
// if a node exits.
func (c *KafkaCluster) WaitReady() {
	c.tb.Helper()
	exited, ready, running := 0, 0, 0
	ok := poll.Wait(KafkaReadyTimeout, 200*time.Millisecond, func() bool {
		ready, running = 0, 0
		for _, nd := range c.nodes {
			done := nd.doneChan()
			if done == nil {
				continue
			}
			select {
			case <-done:
				exited = nd.id
				return true
			default:
			}
			running++
			if n, err := brokersSeen(nd.addr()); err == nil && n >= c.runningCount() {
				ready++
			}
		}
		return running == ready
	})
	switch {
	case exited != 0:
		c.tb.Fatalf("Kafka node %d exited during start-up:\n%s", exited, c.LogTail(exited))
	case !ok:
		c.tb.Fatalf("Kafka cluster: %d of %d running nodes ready within %v", ready, running, KafkaReadyTimeout)
	}
}

func (c *KafkaCluster) runningCount() int {
	n := 0
	for _, nd := range c.nodes {
		if nd.doneChan() != nil {
			n++
		}
	}
	return n
}

func (nd *kafkaNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.port)) }

func (nd *kafkaNode) doneChan() chan struct{} {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		return nil
	}
	return nd.done
}

// Brokers lists every node's client address, node 1 first.
func (c *KafkaCluster) Brokers() []string {
	out := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		out[i] = nd.addr()
	}
	return out
}

// Addr is node id's client address.
func (c *KafkaCluster) Addr(id int) string { return c.node(id).addr() }

// N is the number of nodes.
func (c *KafkaCluster) N() int { return len(c.nodes) }

func (c *KafkaCluster) node(id int) *kafkaNode {
	c.tb.Helper()
	if id < 1 || id > len(c.nodes) {
		c.tb.Fatalf("Kafka node %d: the cluster has nodes 1 to %d", id, len(c.nodes))
	}
	return c.nodes[id-1]
}

// Kill sends SIGKILL to node id (a crash) and waits until it is gone.
func (c *KafkaCluster) Kill(id int) { c.node(id).kill() }

// Stop sends SIGSTOP to node id: it hangs, its connections stay open and
// nothing answers, until Cont.
func (c *KafkaCluster) Stop(id int) { c.signal(id, syscall.SIGSTOP) }

// Cont sends SIGCONT to node id, resuming a node Stop hung.
func (c *KafkaCluster) Cont(id int) { c.signal(id, syscall.SIGCONT) }

func (c *KafkaCluster) signal(id int, sig syscall.Signal) {
	c.tb.Helper()
	nd := c.node(id)
	nd.mu.Lock()
	cmd := nd.cmd
	nd.mu.Unlock()
	if cmd == nil {
		c.tb.Fatalf("Kafka node %d is not running", id)
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		c.tb.Fatalf("signal %v to Kafka node %d: %v", sig, id, err)
	}
	nd.mu.Lock()
	nd.stopped = sig == syscall.SIGSTOP
	nd.mu.Unlock()
}

func (nd *kafkaNode) isStopped() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.stopped
}

// Start starts node id again on its storage and ports (after Kill) and
// waits until the cluster serves.
func (c *KafkaCluster) Start(id int) {
	c.tb.Helper()
	nd := c.node(id)
	if nd.doneChan() != nil {
		c.tb.Fatalf("Kafka node %d is already running", id)
	}
	c.launch(nd)
	c.WaitReady()
}

// Restart is Kill then Start: a crash and a restart in place.
func (c *KafkaCluster) Restart(id int) {
	c.tb.Helper()
	c.Kill(id)
	c.Start(id)
}

func (nd *kafkaNode) kill() {
	nd.mu.Lock()
	cmd, done := nd.cmd, nd.done
	nd.cmd, nd.stopped = nil, false
	nd.mu.Unlock()
	if cmd == nil {
		return
	}
	// A stopped JVM takes SIGKILL as well; SIGCONT after it lets the
	// kernel reap it at once.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	<-done
}

// LogTail is the end of node id's log.
func (c *KafkaCluster) LogTail(id int) string {
	b, _ := os.ReadFile(filepath.Join(c.node(id).dir, "broker.log")) //nolint:gosec // the test's own log
	return tail(b, 40)
}
