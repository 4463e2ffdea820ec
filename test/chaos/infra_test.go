//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/test/kafkatest"
)

// freePort returns a port nothing listens on now.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// repoRoot is the folder holding go.mod (the test runs in test/chaos).
func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ------------------------------------------------------------ PostgreSQL

// pgCluster is a PostgreSQL server of the test's own, fsync on, that the
// test crashes, restarts and stops.
type pgCluster struct {
	name string
	bin  string
	dir  string
	port int
}

// asPG runs a PostgreSQL tool as the postgres user when the test is root
// (the server refuses to run as root).
func asPG(args ...string) *exec.Cmd {
	if os.Getuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec,noctx // the test's own command lines
	cmd.Dir = "/"
	return cmd
}

func startPG(tb testing.TB, name string) *pgCluster {
	tb.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		tb.Fatal("PostgreSQL server binaries missing (/usr/lib/postgresql/*/bin): install the 'postgresql' package")
	}
	sort.Strings(bins)
	c := &pgCluster{name: name, bin: filepath.Dir(bins[len(bins)-1]), port: freePort(tb)}
	dir, err := os.MkdirTemp("", "paysuite-chaos-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	c.dir = dir
	if os.Getuid() == 0 {
		if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil { //nolint:noctx // a quick chown
			tb.Fatalf("chown %s: %v: %s", dir, err, out)
		}
	}
	tb.Cleanup(func() {
		_ = asPG(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", "immediate", "-w", "stop").Run()
		_ = os.RemoveAll(dir)
	})
	if out, err := asPG(filepath.Join(c.bin, "initdb"), "-D", c.data(), "-A", "trust", "-U", "postgres",
		"--encoding=UTF8", "--locale=C").CombinedOutput(); err != nil {
		tb.Fatalf("initdb %s: %v: %s", name, err, out)
	}
	c.start(tb)
	return c
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

// start starts the server with fsync (and synchronous commit) on, as
// production runs, and waits until it accepts connections.
func (c *pgCluster) start(tb testing.TB) {
	tb.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on "+
		"-c full_page_writes=on -c max_connections=300 "+
		// The logical relay's needs (-chaos.relay=logical); harmless to the
		// polling relay. A lost walsender frees its slot within 10 s.
		"-c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10 -c max_slot_wal_keep_size=1GB "+
		"-c wal_sender_timeout=10s", c.port, c.dir)
	if out, err := asPG(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-l", filepath.Join(c.dir, "postgres.log"),
		"-w", "-t", "120", "start", "-o", opts).CombinedOutput(); err != nil {
		tb.Fatalf("start PostgreSQL %s: %v: %s\n%s", c.name, err, out, c.logTail())
	}
}

// restartImmediate is `pg_ctl restart -m immediate`: a crash (no
// checkpoint, every connection cut) and crash recovery.
func (c *pgCluster) restartImmediate(tb testing.TB) {
	tb.Helper()
	if out, err := asPG(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-l", filepath.Join(c.dir, "postgres.log"),
		"-m", "immediate", "-w", "-t", "120", "restart").CombinedOutput(); err != nil {
		tb.Fatalf("restart PostgreSQL %s: %v: %s\n%s", c.name, err, out, c.logTail())
	}
}

// stopImmediate stops the server as a crash would.
func (c *pgCluster) stopImmediate(tb testing.TB) {
	tb.Helper()
	if out, err := asPG(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		tb.Fatalf("stop PostgreSQL %s: %v: %s", c.name, err, out)
	}
}

func (c *pgCluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log")) //nolint:gosec // the test's own log
	return tail(b, 30)
}

// dsn is the URL of database db, tagged with the application name (which
// pg_stat_activity shows, so the test can tell the processes apart).
func (c *pgCluster) dsn(db, app string) string {
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
	if app != "" {
		u += "&application_name=" + app
	}
	return u
}

// createDB creates database db.
func (c *pgCluster) createDB(tb testing.TB, db string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn("postgres", ""))
	if err != nil {
		tb.Fatalf("connect %s: %v", c.name, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		tb.Fatalf("create database %s: %v", db, err)
	}
}

// ----------------------------------------------------------------- Kafka

// kafkaBroker is a single-node KRaft broker of the test's own, from the
// Apache jars the harness resolves (kafkatest.KafkaLibs), on fixed ports
// so that it comes back where the services expect it after a kill -9.
type kafkaBroker struct {
	libs        string
	dir         string
	port, cport int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func startKafka(tb testing.TB) *kafkaBroker {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	libs, err := kafkatest.KafkaLibs(ctx)
	if err != nil {
		tb.Fatalf("Kafka jars: %v", err)
	}
	dir, err := os.MkdirTemp("", "paysuite-chaos-kafka-")
	if err != nil {
		tb.Fatal(err)
	}
	b := &kafkaBroker{libs: libs, dir: dir, port: freePort(tb), cport: freePort(tb)}
	tb.Cleanup(func() {
		b.kill()
		_ = os.RemoveAll(dir)
	})
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(b.properties()), 0o600); err != nil {
		tb.Fatal(err)
	}
	id := make([]byte, 16)
	cluster := "-"
	for strings.HasPrefix(cluster, "-") {
		_, _ = rand.Read(id)
		cluster = base64.RawURLEncoding.EncodeToString(id)
	}
	if out, err := b.java("kafka.tools.StorageTool", "format", "--standalone", "-t", cluster, "-c", props).CombinedOutput(); err != nil {
		tb.Fatalf("format the Kafka storage: %v\n%s", err, out)
	}
	b.start(tb)
	return b
}

func (b *kafkaBroker) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

func (b *kafkaBroker) java(args ...string) *exec.Cmd {
	all := append([]string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
		"-cp", filepath.Join(b.libs, "*")}, args...)
	cmd := exec.Command("java", all...) //nolint:gosec,noctx // the test's own command line
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func (b *kafkaBroker) properties() string {
	return fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[3]s
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
`, b.port, b.cport, filepath.Join(b.dir, "data"))
}

// start launches the broker on its storage and waits until it answers a
// metadata request naming itself.
func (b *kafkaBroker) start(tb testing.TB) {
	tb.Helper()
	logf, err := os.OpenFile(filepath.Join(b.dir, "broker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600) //nolint:gosec // the test's own log
	if err != nil {
		tb.Fatal(err)
	}
	cmd := b.java("-Xmx768m", "kafka.Kafka", filepath.Join(b.dir, "server.properties"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		tb.Fatalf("start Kafka: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	b.mu.Lock()
	b.cmd, b.done = cmd, done
	b.mu.Unlock()
	deadline := time.Now().Add(3 * time.Minute)
	for !b.ready() {
		select {
		case <-done:
			tb.Fatalf("Kafka exited during start-up:\n%s", b.logTail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("Kafka not ready within 3m:\n%s", b.logTail())
		}
	}
}

// ready reports whether the broker answers a metadata request.
func (b *kafkaBroker) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t := &kafka.Transport{}
	defer t.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(b.addr()), Transport: t}
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	return err == nil && len(meta.Brokers) > 0
}

// kill sends SIGKILL to the broker's process group and waits for it.
func (b *kafkaBroker) kill() {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

func (b *kafkaBroker) logTail() string {
	data, _ := os.ReadFile(filepath.Join(b.dir, "broker.log")) //nolint:gosec // the test's own log
	return tail(data, 40)
}

// -------------------------------------------------------------- services

// buildBinaries builds the four services' commands into dir.
func buildBinaries(root, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := []string{"build", "-o", dir + "/"}
	for _, s := range []string{"transfers", "ledger", "antifraud", "notifications"} {
		args = append(args, "./services/"+s+"/cmd/"+s)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build the services: %w\n%s", err, out)
	}
	return nil
}

// proc is one service instance run as an OS process on a fixed port, so
// that Prometheus finds it again after a restart.
type proc struct {
	name string // instance name, e.g. transfers-a
	job  string // service name, Prometheus job
	bin  string
	env  []string
	port int
	log  string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	starts  int
	running bool
}

func (p *proc) url() string { return "http://127.0.0.1:" + strconv.Itoa(p.port) }

// start runs the process and waits until /readyz answers 200.
func (p *proc) start(tb testing.TB) {
	tb.Helper()
	if err := p.startErr(); err != nil {
		tb.Fatal(err)
	}
}

func (p *proc) startErr() error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin) //nolint:gosec,noctx // the test's own binary; killed by the test
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.running = cmd, done, true
	p.starts++
	p.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for !get200(p.url() + "/readyz") {
		select {
		case <-done:
			p.mu.Lock()
			p.running = false
			p.mu.Unlock()
			return fmt.Errorf("%s exited during start-up:\n%s", p.name, p.logTail(30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: /readyz not 200 within 2m:\n%s", p.name, p.logTail(30))
		}
	}
	return nil
}

// kill9 sends SIGKILL and waits until the process is gone.
func (p *proc) kill9() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.running = nil, false
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// exitedEarly reports whether a process the test did not kill has exited.
func (p *proc) exitedEarly() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) logTail(lines int) string {
	b, _ := os.ReadFile(p.log)
	return tail(b, lines)
}

func get200(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func tail(b []byte, lines int) string {
	parts := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// ------------------------------------------------------------ Prometheus

// promServer is a real Prometheus scraping the services every second with
// a test copy of deploy/prometheus/alerts.yml.
type promServer struct {
	url string
}

// alertsForTest rewrites the rules' `for:` durations for a test that
// cannot wait minutes: 1m becomes 3s, 2m 10s, 5m 30s. Everything else
// (expressions, labels) is the file as deployed.
func alertsForTest(rules []byte) []byte {
	rules = bytes.ReplaceAll(rules, []byte("for: 1m"), []byte("for: 3s"))
	rules = bytes.ReplaceAll(rules, []byte("for: 2m"), []byte("for: 10s"))
	return bytes.ReplaceAll(rules, []byte("for: 5m"), []byte("for: 30s"))
}

func startPrometheus(tb testing.TB, root string, jobs map[string][]string) *promServer {
	tb.Helper()
	if _, err := exec.LookPath("prometheus"); err != nil {
		tb.Fatal("prometheus not on PATH: install Debian's 'prometheus' package (test/infra/ensure-promtool.sh does)")
	}
	dir, err := os.MkdirTemp("", "paysuite-chaos-prom-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	rules, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), alertsForTest(rules), 0o600); err != nil { //nolint:gosec // the test's own temp folder
		tb.Fatal(err)
	}
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n")
	cfg.WriteString("rule_files:\n  - alerts.yml\nscrape_configs:\n")
	names := make([]string, 0, len(jobs))
	for j := range jobs {
		names = append(names, j)
	}
	sort.Strings(names)
	for _, j := range names {
		targets := make([]string, len(jobs[j]))
		for i, t := range jobs[j] {
			targets[i] = strconv.Quote(t)
		}
		fmt.Fprintf(&cfg, "  - job_name: %s\n    metrics_path: /metrics\n    static_configs:\n      - targets: [%s]\n",
			j, strings.Join(targets, ", "))
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	port := freePort(tb)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log")) //nolint:gosec // the test's own log
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"), //nolint:gosec,noctx // killed at cleanup
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	p := &promServer{url: "http://127.0.0.1:" + strconv.Itoa(port)}
	deadline := time.Now().Add(time.Minute)
	for !get200(p.url + "/-/ready") {
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log")) //nolint:gosec // the test's own log
			tb.Fatalf("prometheus exited:\n%s", tail(b, 30))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatal("prometheus not ready within 1m")
		}
	}
	return p
}

var errNoProm = errors.New("prometheus query failed")
