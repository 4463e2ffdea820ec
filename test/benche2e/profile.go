package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// profiler takes, with -profile DIR, what explains an aim that is
// missed: each service's CPU profile during every step and heap profile at
// a deployment's start and end (the binaries are built with the tag
// benchprofile, which serves net/http/pprof on PPROF_ADDR), PostgreSQL's
// statements by time spent (pg_stat_statements, when the server preloads it
// as make bench-e2e does) and the CPU of the servers' own processes.
type profiler struct {
	dir       string
	serverURL string
	out       io.Writer
	// statements is set once pg_stat_statements was turned on.
	statements bool
}

// pprofPort is the pprof listener of the service at index i (the
// all-in-one binary uses index 0).
func (b *bench) pprofAddr(i int) string { return fmt.Sprintf("127.0.0.1:%d", b.o.basePort+50+i) }

// trackStatements sets pg_stat_statements' tracking of the server: all
// statements when profiling, none otherwise (loaded but idle, so that runs
// without -profile pay nothing for it). A server without the extension
// preloaded is left alone; with -profile that is said.
func trackStatements(ctx context.Context, serverURL string, on bool, out io.Writer) bool {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	track := "none"
	if on {
		track = "all"
	}
	for _, q := range []string{
		"CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
		"ALTER SYSTEM SET pg_stat_statements.track = '" + track + "'",
		"SELECT pg_reload_conf()",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			if on {
				fmt.Fprintf(out, "profile: no statement profile (start PostgreSQL with -c shared_preload_libraries=pg_stat_statements, as make bench-e2e does): %v\n", err)
			}
			return false
		}
	}
	return true
}

// resetStatements empties pg_stat_statements before a step.
func (p *profiler) resetStatements(ctx context.Context) {
	if !p.statements {
		return
	}
	conn, err := pgx.Connect(ctx, p.serverURL)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	_, _ = conn.Exec(ctx, "SELECT pg_stat_statements_reset()")
}

// dumpStatements writes the statements of the step, by total execution
// time, with their calls per settled transfer, to name, and prints the
// first few.
func (p *profiler) dumpStatements(ctx context.Context, name string, transfers int) {
	if !p.statements || transfers == 0 {
		return
	}
	conn, err := pgx.Connect(ctx, p.serverURL)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	rows, err := conn.Query(ctx, `
		SELECT d.datname, s.calls, s.total_exec_time, s.rows, regexp_replace(s.query, '\s+', ' ', 'g')
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname LIKE 'payments_%'
		ORDER BY s.total_exec_time DESC`)
	if err != nil {
		fmt.Fprintf(p.out, "profile: pg_stat_statements: %v\n", err)
		return
	}
	defer rows.Close()
	f, err := os.Create(filepath.Join(p.dir, name)) //nolint:gosec // the bench's profile folder
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "database\tcalls/transfer\tms/transfer\tms/call\trows/call\tstatement")
	var total float64
	type stmt struct {
		db    string
		calls int64
		ms    float64
		rows  int64
		query string
	}
	var all []stmt
	for rows.Next() {
		var s stmt
		if err := rows.Scan(&s.db, &s.calls, &s.ms, &s.rows, &s.query); err != nil {
			return
		}
		total += s.ms
		all = append(all, s)
	}
	n := float64(transfers)
	for _, s := range all {
		q := s.query
		if len(q) > 160 {
			q = q[:160] + "…"
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.3f\t%.3f\t%.1f\t%s\n", strings.TrimPrefix(s.db, "payments_"), float64(s.calls)/n, s.ms/n,
			s.ms/float64(max(s.calls, 1)), float64(s.rows)/float64(max(s.calls, 1)), q)
	}
	_ = tw.Flush()
	fmt.Fprintf(p.out, "profile: PostgreSQL statement time %.2f ms per settled transfer (%s)\n", total/n, f.Name())
}

// fetch saves url's body to name in the profile folder.
func (p *profiler) fetch(ctx context.Context, url, name string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(filepath.Join(p.dir, name)) //nolint:gosec // the bench's profile folder
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// cpuProfiles takes a CPU profile of every process for d, concurrently,
// and returns when all are written.
func (b *bench) cpuProfiles(ctx context.Context, procs []*proc, d time.Duration, prefix string) {
	secs := max(int(d.Seconds()), 1)
	done := make(chan error, len(procs))
	for i, pr := range procs {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", b.pprofAddr(b.index(pr.name, i)), secs)
		name := prefix + "-" + pr.name + ".cpu.pprof"
		go func() { done <- b.prof.fetch(ctx, url, name) }()
	}
	for range procs {
		if err := <-done; err != nil {
			fmt.Fprintf(b.out, "profile: %v\n", err)
		}
	}
}

// heapProfiles saves every process's heap profile.
func (b *bench) heapProfiles(ctx context.Context, procs []*proc, prefix string) {
	for i, pr := range procs {
		url := fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", b.pprofAddr(b.index(pr.name, i)))
		if err := b.prof.fetch(ctx, url, prefix+"-"+pr.name+".heap.pprof"); err != nil {
			fmt.Fprintf(b.out, "profile: %v\n", err)
		}
	}
}

// index is the port index of a process: its service's, or 0 for the
// all-in-one binary.
func (b *bench) index(name string, fallback int) int {
	for i, s := range services {
		if s == name {
			return i
		}
	}
	return fallback
}

// serverUsage sums the CPU time of the servers the bench runs on: the
// PostgreSQL server listening on pgPort with every process it forked
// (backends, WAL writer, checkpointer...), those alive and those that
// exited (the postmaster's reaped children), so that the sum never goes
// down when a backend ends; and the Kafka broker listening on kafkaPort,
// read from /proc like the services'. Servers of other runs on the same
// machine are left out.
func serverUsage(pgPort, kafkaPort int) map[string]time.Duration {
	out := map[string]time.Duration{}
	parents := map[int]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			s := string(b)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]); len(f) > 1 {
				parents[pid], _ = strconv.Atoi(f[1])
			}
		}
	}
	add := func(name string, pid int, reaped bool) {
		if u, err := readUsage(pid); err == nil {
			out[name] += u.cpu
			if reaped {
				out[name] += u.reaped
			}
		}
	}
	if pm := listenerPID(pgPort); pm > 0 {
		add("postgresql (all processes)", pm, true)
		for pid, ppid := range parents {
			if ppid == pm {
				add("postgresql (all processes)", pid, false)
			}
		}
	}
	if k := listenerPID(kafkaPort); k > 0 {
		add("kafka broker (JVM)", k, false)
	}
	return out
}

// jitUsage is the CPU time of the JIT compiler threads ("C1 CompilerThre",
// "C2 CompilerThre") of the broker listening on kafkaPort: the part of its
// CPU that is warm-up, not requests.
func jitUsage(kafkaPort int) time.Duration {
	k := listenerPID(kafkaPort)
	if k <= 0 {
		return 0
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", k))
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t) //nolint:gosec // /proc
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || !strings.Contains(s[open:end], "CompilerThre") {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * (time.Second / clockTick)
	}
	return total
}

// listenerPID returns the process listening on TCP port (IPv4 or IPv6),
// or 0.
func listenerPID(port int) int {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table) //nolint:gosec // /proc/net/tcp and tcp6
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	return 0
}

// machineBusy returns the busy and total CPU time of the whole machine
// (every core), from /proc/stat.
func machineBusy() (busy, total time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0
	}
	var sum, idle int64
	for i, f := range fields[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		sum += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	tick := time.Second / clockTick
	return time.Duration(sum-idle) * tick, time.Duration(sum) * tick
}

// serverProfiles profiles, for d, what runs beside the services: the whole
// machine with perf (Linux's sampling profiler; PostgreSQL's functions by
// name, and every process's share), and the Kafka broker's JVM with Java
// Flight Recorder (jcmd). A missing tool is said and skipped. It writes the
// raw recordings and a text summary of each to the profile folder.
func (b *bench) serverProfiles(ctx context.Context, d time.Duration, prefix string) {
	secs := max(int(d.Seconds()), 1)
	var wg sync.WaitGroup
	if perf, err := exec.LookPath("perf"); err == nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := filepath.Join(b.prof.dir, prefix+".perf.data")
			rec := exec.CommandContext(ctx, perf, "record", "-a", "-g", "-F", "499", "-o", data, "--", "sleep", strconv.Itoa(secs)) //nolint:gosec // the bench's own tool call
			if out, err := rec.CombinedOutput(); err != nil {
				fmt.Fprintf(b.out, "profile: perf record: %v: %s\n", err, lastLine(out))
				return
			}
			b.perfSummary(ctx, perf, data, prefix)
		}()
	} else {
		fmt.Fprintln(b.out, "profile: no perf (Debian's linux-perf): no PostgreSQL profile")
	}
	if jcmd, err := exec.LookPath("jcmd"); err == nil {
		if pid := listenerPID(b.kafkaPort); pid > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				jfrFile := filepath.Join(b.prof.dir, prefix+"-kafka.jfr")
				start := exec.CommandContext(ctx, jcmd, strconv.Itoa(pid), "JFR.start", "settings=profile", //nolint:gosec // the bench's own tool call
					fmt.Sprintf("duration=%ds", secs), "filename="+jfrFile)
				if out, err := start.CombinedOutput(); err != nil {
					fmt.Fprintf(b.out, "profile: jcmd JFR.start: %v: %s\n", err, lastLine(out))
					return
				}
				// The recording is written when its duration ends.
				deadline := time.Now().Add(d + 30*time.Second)
				for time.Now().Before(deadline) && ctx.Err() == nil {
					if st, err := os.Stat(jfrFile); err == nil && st.Size() > 0 && time.Since(st.ModTime()) > time.Second {
						break
					}
					time.Sleep(500 * time.Millisecond)
				}
				b.jfrSummary(ctx, jfrFile, prefix)
			}()
		}
	} else {
		fmt.Fprintln(b.out, "profile: no jcmd: no Kafka broker profile")
	}
	wg.Wait()
}

// perfSummary writes each process's share of the samples and PostgreSQL's
// hottest functions.
func (b *bench) perfSummary(ctx context.Context, perf, data, prefix string) {
	name := filepath.Join(b.prof.dir, prefix+"-perf.txt")
	f, err := os.Create(name) //nolint:gosec // the bench's profile folder
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	for _, args := range [][]string{
		{"report", "-i", data, "--stdio", "--no-children", "--sort", "comm", "--percent-limit", "0.5", "-g", "none"},
		{"report", "-i", data, "--stdio", "--no-children", "--comms", "postgres", "--sort", "dso,symbol", "--percentage", "relative", "--percent-limit", "0.7", "-g", "none"},
	} {
		cmd := exec.CommandContext(ctx, perf, args...) //nolint:gosec // the bench's own tool call
		out, err := cmd.Output()
		if err != nil {
			fmt.Fprintf(b.out, "profile: perf report: %v\n", err)
			continue
		}
		fmt.Fprintf(f, "$ perf %s\n", strings.Join(args, " "))
		for _, line := range strings.Split(string(out), "\n") {
			if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
				fmt.Fprintln(f, line)
			}
		}
		fmt.Fprintln(f)
	}
	fmt.Fprintf(b.out, "profile: machine and PostgreSQL (perf): %s\n", name)
}

// jfrSummary reads the broker's execution samples and counts them by the
// request type being handled (the KafkaApis.handle* method on the stack) and
// by thread, which tells what the broker's CPU goes to.
func (b *bench) jfrSummary(ctx context.Context, jfrFile, prefix string) {
	jfr, err := exec.LookPath("jfr")
	if err != nil {
		return
	}
	out, err := exec.CommandContext(ctx, jfr, "print", "--events", "jdk.ExecutionSample", "--stack-depth", "64", jfrFile).Output() //nolint:gosec // the bench's own tool call
	if err != nil {
		fmt.Fprintf(b.out, "profile: jfr print: %v\n", err)
		return
	}
	byRequest, byThread := map[string]int{}, map[string]int{}
	total := 0
	for _, ev := range strings.Split(string(out), "jdk.ExecutionSample {")[1:] {
		total++
		req := "(no request: network, log, replication, controller, GC-free JVM work)"
		if i := strings.Index(ev, "KafkaApis.handle"); i >= 0 {
			rest := ev[i+len("KafkaApis."):]
			req = rest[:strings.IndexAny(rest, "(")]
		}
		byRequest[req]++
		thread := "?"
		if i := strings.Index(ev, `sampledThread = "`); i >= 0 {
			rest := ev[i+len(`sampledThread = "`):]
			thread = strings.TrimRight(rest[:strings.IndexByte(rest, '"')], "0123456789-")
		}
		byThread[thread]++
	}
	name := filepath.Join(b.prof.dir, prefix+"-kafka.txt")
	f, err := os.Create(name) //nolint:gosec // the bench's profile folder
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	fmt.Fprintf(f, "Kafka broker, Java Flight Recorder execution samples: %d\n\nby request type handled:\n", total)
	writeShares(f, byRequest, total)
	fmt.Fprintln(f, "\nby thread:")
	writeShares(f, byThread, total)
	fmt.Fprintf(b.out, "profile: Kafka broker (JFR, %d samples): %s\n", total, name)
}

// writeShares writes counts by share, largest first.
func writeShares(w io.Writer, counts map[string]int, total int) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	for _, k := range keys {
		fmt.Fprintf(w, "  %5.1f%%  %6d  %s\n", 100*float64(counts[k])/float64(max(total, 1)), counts[k], k)
	}
}

// lastLine is the last non-empty line of out.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
