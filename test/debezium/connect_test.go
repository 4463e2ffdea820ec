//go:build debezium

package debezium

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
	"github.com/paysuite/payments/test/support/repo"
)

var (
	flagLibs = flag.String("debezium.libs", "", "the Kafka Connect and Debezium jars (default: .cache/debezium/3.6.1.Final/libs, which test/infra/debezium/resolve.sh fills)")
	flagRest = flag.Int("debezium.rest-port", 0, "the Connect worker's REST port (default: a free one)")
	flagJVM  = flag.String("debezium.jvm", "-Xmx768m -XX:+UseSerialGC", "JVM flags of the Connect worker")
)

// documentedConnector returns the connector configuration of
// deploy/README.md: the first JSON block of its section "Debezium instead of
// the polling relay", so that what runs here is what the docs tell
// operators to deploy.
func documentedConnector(tb testing.TB) (name string, config map[string]string) {
	tb.Helper()
	doc, err := os.ReadFile(filepath.Join(repo.Path(tb), "deploy", "README.md"))
	if err != nil {
		tb.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Debezium instead of the polling relay")
	if !ok {
		tb.Fatal(`deploy/README.md has no section "Debezium instead of the polling relay"`)
	}
	_, block, ok := strings.Cut(section, "```json\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		tb.Fatal("deploy/README.md: no JSON block in the Debezium section")
	}
	var c struct {
		Name   string            `json:"name"`
		Config map[string]string `json:"config"`
	}
	if err := json.Unmarshal([]byte(block), &c); err != nil {
		tb.Fatalf("deploy/README.md: the Debezium connector JSON: %v", err)
	}
	return c.Name, c.Config
}

// connectWorker is one Kafka Connect standalone worker (a JVM) running the
// documented connector against one database.
type connectWorker struct {
	tb   testing.TB
	db   *postgres.DB
	dir  string
	name string
	slot string
	rest int
	cmd  *exec.Cmd
	exit chan struct{}
}

// startConnect starts a worker whose connector reads db, publishes to the
// brokers of kafkatest, and waits until the connector streams its slot.
// extra overrides the documented configuration (for example a header
// placement). The worker is stopped, and its slot and publication dropped,
// when tb ends.
func startConnect(tb testing.TB, db *postgres.DB, extra map[string]string) *connectWorker {
	tb.Helper()
	libs := *flagLibs
	if libs == "" {
		libs = filepath.Join(repo.Path(tb), ".cache", "debezium", "3.6.1.Final", "libs")
	}
	if _, err := os.Stat(filepath.Join(libs, ".complete")); err != nil {
		tb.Fatalf("no Kafka Connect and Debezium jars in %s (%v): run `make debezium`, which resolves them with test/infra/debezium/resolve.sh", libs, err)
	}
	w := &connectWorker{tb: tb, db: db, dir: tb.TempDir(), rest: *flagRest, exit: make(chan struct{})}
	if w.rest == 0 {
		w.rest = freePort(tb)
	}
	name, cfg := documentedConnector(tb)
	w.name = name
	// The database the test made, reached as the tests reach it.
	cc := db.Config().ConnConfig
	cfg["database.hostname"] = cc.Host
	cfg["database.port"] = strconv.Itoa(int(cc.Port))
	cfg["database.dbname"] = cc.Database
	cfg["database.user"] = cc.User
	cfg["database.password"] = cc.Password
	// One slot and publication per test database (names are per server).
	w.slot = "dbz_" + strings.ToLower(strings.ReplaceAll(cc.Database, "-", "_"))
	if len(w.slot) > 63 {
		w.slot = w.slot[:63]
	}
	cfg["slot.name"] = w.slot
	cfg["publication.name"] = w.slot
	for k, v := range extra {
		cfg[k] = v
	}
	cfg["name"] = name
	worker := map[string]string{
		"bootstrap.servers":            strings.Join(kafkatest.Brokers(tb), ","),
		"key.converter":                "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":              "org.apache.kafka.connect.storage.StringConverter",
		"offset.storage.file.filename": filepath.Join(w.dir, "offsets"),
		"offset.flush.interval.ms":     "1000",
		"listeners":                    "http://127.0.0.1:" + strconv.Itoa(w.rest),
		// The jars are on the classpath; nothing to scan for.
		"plugin.discovery": "only_scan",
	}
	writeProperties(tb, filepath.Join(w.dir, "worker.properties"), worker)
	writeProperties(tb, filepath.Join(w.dir, "connector.properties"), cfg)
	tb.Cleanup(w.cleanup)
	w.start()
	return w
}

// start launches the JVM and waits until the connector streams the slot.
func (w *connectWorker) start() {
	w.tb.Helper()
	logf, err := os.OpenFile(filepath.Join(w.dir, "connect.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		w.tb.Fatal(err)
	}
	args := append(strings.Fields(*flagJVM), "-Djava.awt.headless=true",
		"-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", filepath.Join(w.libsDir(), "*"), "org.apache.kafka.connect.cli.ConnectStandalone",
		filepath.Join(w.dir, "worker.properties"), filepath.Join(w.dir, "connector.properties"))
	w.cmd = exec.CommandContext(context.Background(), "java", args...)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		_ = logf.Close()
		w.tb.Fatalf("start Kafka Connect: %v", err)
	}
	exit := make(chan struct{})
	w.exit = exit
	go func() { _ = w.cmd.Wait(); _ = logf.Close(); close(exit) }()
	w.waitSlot(true)
}

func (w *connectWorker) libsDir() string {
	if *flagLibs != "" {
		return *flagLibs
	}
	return filepath.Join(repo.Path(w.tb), ".cache", "debezium", "3.6.1.Final", "libs")
}

// waitSlot waits until the connector's slot is streamed (active) or not.
func (w *connectWorker) waitSlot(active bool) {
	w.tb.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var got bool
		err := w.db.QueryRow(context.Background(),
			`SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = $1`, w.slot).Scan(&got)
		if err == nil && got == active {
			return
		}
		select {
		case <-w.exit:
			if active {
				w.tb.Fatalf("Kafka Connect exited before its connector streamed slot %s:\n%s", w.slot, w.logTail(60))
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			w.tb.Fatalf("slot %s active=%v not reached within 3m (err %v):\n%s", w.slot, active, err, w.logTail(60))
		}
	}
}

// call sends a REST request to the worker.
func (w *connectWorker) call(method, path string) {
	w.tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method,
		"http://127.0.0.1:"+strconv.Itoa(w.rest)+"/connectors/"+url.PathEscape(w.name)+path, nil)
	if err != nil {
		w.tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.tb.Fatalf("Kafka Connect %s %s: %v", method, path, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		w.tb.Fatalf("Kafka Connect %s %s: %s", method, path, resp.Status)
	}
}

// taskFailure returns the trace of the connector's failed task, or "" while
// no task has failed: a task that failed publishes nothing until an
// operator restarts it, so a test waiting for its records stops at once.
func (w *connectWorker) taskFailure() string {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet,
		"http://127.0.0.1:"+strconv.Itoa(w.rest)+"/connectors/"+url.PathEscape(w.name)+"/status", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	var st struct {
		Tasks []struct {
			State string `json:"state"`
			Trace string `json:"trace"`
		} `json:"tasks"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return ""
	}
	for _, t := range st.Tasks {
		if t.State == "FAILED" {
			return t.Trace
		}
	}
	return ""
}

// waitRecords waits until count reaches n, failing the test at once when
// the connector's task has failed.
func (w *connectWorker) waitRecords(n int, count func() int) {
	w.tb.Helper()
	var trace string
	ok := poll.Wait(2*time.Minute, 100*time.Millisecond, func() bool {
		if trace = w.taskFailure(); trace != "" {
			return true
		}
		return count() >= n
	})
	if trace != "" {
		w.tb.Fatalf("the Debezium task failed with %d of %d records published:\n%s", count(), n, trace)
	}
	if !ok {
		w.tb.Fatalf("%d of %d records published by Debezium within 2m", count(), n)
	}
}

// stopConnector stops the connector's task (REST stop) and waits until the
// slot is no longer streamed: what it reads next waits in the slot.
func (w *connectWorker) stopConnector() {
	w.tb.Helper()
	w.call(http.MethodPut, "/stop")
	w.waitSlot(false)
}

// resumeConnector restarts the stopped connector and waits until it
// streams.
func (w *connectWorker) resumeConnector() {
	w.tb.Helper()
	w.call(http.MethodPut, "/resume")
	w.waitSlot(true)
}

// cleanup stops the JVM, prints its log if the test failed, and drops the
// slot (a slot nobody reads holds WAL, and blocks DROP DATABASE) and the
// publication.
func (w *connectWorker) cleanup() {
	if w.cmd != nil && w.cmd.Process != nil {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.exit:
		case <-time.After(30 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.exit
		}
	}
	if w.tb.Failed() {
		w.tb.Logf("Kafka Connect log (%s):\n%s", w.dir, w.logTail(80))
	}
	poll.True(w.tb, 30*time.Second, "slot "+w.slot+" dropped", func() bool {
		_, err := w.db.Exec(context.Background(),
			`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, w.slot)
		return err == nil
	})
	_, _ = w.db.Exec(context.Background(), `DROP PUBLICATION IF EXISTS `+w.slot)
}

func (w *connectWorker) logTail(lines int) string {
	b, _ := os.ReadFile(filepath.Join(w.dir, "connect.log"))
	all := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// writeProperties writes m as a Java properties file, keys sorted.
func writeProperties(tb testing.TB, path string, m map[string]string) {
	tb.Helper()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		// A backslash is the properties escape; the values here have none
		// that mean one.
		fmt.Fprintf(&b, "%s=%s\n", k, strings.ReplaceAll(m[k], `\`, `\\`))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
}

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
