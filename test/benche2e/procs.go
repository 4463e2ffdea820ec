package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// services are the four services, in start order, with the port offset of
// each from the bench's base port.
var services = []string{"transfers", "ledger", "antifraud", "notifications"}

// build compiles the all-in-one binary (the development runner
// payments-dev, which uses KAFKA_BROKERS rather than kfake when set) and the
// four service binaries into dir and returns their paths by name
// ("payments" and each service).
func build(ctx context.Context, root, dir string, tags []string) (map[string]string, error) {
	pkgs := map[string]string{"payments": "./services/suite/cmd/payments-dev"}
	for _, s := range services {
		pkgs[s] = "./services/" + s + "/cmd/" + s
	}
	out := map[string]string{}
	for name, pkg := range pkgs {
		bin := filepath.Join(dir, name)
		args := []string{"build", "-o", bin}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		cmd := exec.CommandContext(ctx, "go", append(args, pkg)...) //nolint:gosec // the suite's own packages
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go build %s: %w", pkg, err)
		}
		out[name] = bin
	}
	return out, nil
}

// proc is one service process the bench started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan error
	log  *os.File
}

// start runs bin with env (added to the bench's own) and args; its output
// goes to logDir/<name>.log.
func start(name, bin string, args []string, env map[string]string, logDir string) (*proc, error) {
	f, err := os.Create(filepath.Join(logDir, name+".log")) //nolint:gosec // the bench's log folder
	if err != nil {
		return nil, err
	}
	// Not CommandContext: a process is stopped by SIGTERM (stop), so that
	// it shuts down in order, never killed by a context.
	cmd := exec.Command(bin, args...) //nolint:gosec,noctx // the bench's own binaries
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan error, 1), log: f}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

// stop sends SIGTERM and waits up to a minute, then kills.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		p.done <- <-p.done
	}
	_ = p.log.Close()
}

// exited reports the process's exit when it has ended.
func (p *proc) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil {
			err = errors.New("exited")
		}
		return fmt.Errorf("%s: %w (log: %s)", p.name, err, p.log.Name())
	default:
		return nil
	}
}

// waitReady polls each URL's /readyz until all answer 200.
func waitReady(ctx context.Context, procs []*proc, urls []string) error {
	deadline := time.Now().Add(3 * time.Minute)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		ready := true
		for _, u := range urls {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"/readyz", nil)
			resp, err := client.Do(req)
			if err != nil {
				ready = false
				break
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				ready = false
				break
			}
		}
		if ready {
			return nil
		}
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("services not ready within 3 minutes: %v", urls)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// usage is a process's CPU time and resident memory at one moment.
type usage struct {
	at  time.Time
	cpu time.Duration // user + system
	// reaped is the CPU time of the process's children that exited and
	// were waited for (cutime + cstime): a PostgreSQL backend that ends
	// takes its CPU out of the live processes' sum and into this.
	reaped time.Duration
	rssKiB int64
}

// clockTick is USER_HZ, 100 on every Linux the bench runs on.
const clockTick = 100

// readUsage reads /proc/<pid>/stat and /proc/<pid>/status.
func readUsage(pid int) (usage, error) {
	u := usage{at: time.Now()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which ends with the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 15 {
		return u, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	ticks := func(i int) time.Duration {
		n, _ := strconv.ParseInt(fields[i], 10, 64)
		return time.Duration(n) * time.Second / clockTick
	}
	u.cpu = ticks(11) + ticks(12)
	u.reaped = ticks(13) + ticks(14)
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			u.rssKiB, _ = strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	return u, sc.Err()
}

// heapRE reads the Go heap in use from a service's /metrics.
var heapRE = regexp.MustCompile(`(?m)^go_memstats_heap_inuse_bytes (\S+)$`)

// heapInUse returns the heap in use of the service at url, in MiB (-1 when
// unknown).
func heapInUse(ctx context.Context, url string) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "go_memstats_heap_inuse_bytes ") {
			sb.WriteString(sc.Text())
			break
		}
	}
	m := heapRE.FindStringSubmatch(sb.String())
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v / (1 << 20)
}
