//go:build chaos

package chaos

import (
	"bytes"
	"context"
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
