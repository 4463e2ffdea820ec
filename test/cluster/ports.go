package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Environment variables naming the port ranges ("first-last") the servers
// of this package listen on; unset, the kernel picks free ports.
const (
	EnvKafkaPorts = "TEST_CLUSTER_KAFKA_PORTS"
	EnvPGPorts    = "TEST_CLUSTER_PG_PORTS"
)

var (
	portsMu sync.Mutex
	// handedOut remembers the ports given in this process, so that two
	// servers started before either binds do not get the same one.
	handedOut = map[int]bool{}
)

// freePort returns a port nothing listens on now: the first free one of
// the range in env when set, else one the kernel picks.
func freePort(tb testing.TB, env string) int {
	tb.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	first, last, err := portRange(os.Getenv(env))
	if err != nil {
		tb.Fatalf("%s: %v", env, err)
	}
	if first == 0 {
		for range 100 {
			p, err := listenFree(0)
			if err != nil {
				tb.Fatalf("free port: %v", err)
			}
			if !handedOut[p] {
				handedOut[p] = true
				return p
			}
		}
		tb.Fatal("free port: the kernel keeps handing out ports already given")
	}
	for p := first; p <= last; p++ {
		if handedOut[p] {
			continue
		}
		if _, err := listenFree(p); err == nil {
			handedOut[p] = true
			return p
		}
	}
	tb.Fatalf("%s=%s: no free port left", env, os.Getenv(env))
	return 0
}

// portRange parses "first-last"; "" is (0, 0, nil).
func portRange(s string) (first, last int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || first <= 0 || last < first || last > 65535 {
		return 0, 0, fmt.Errorf("%q is not a port range first-last", s)
	}
	return first, last, nil
}

// listenFree binds 127.0.0.1:port and releases it, returning the port.
func listenFree(port int) (int, error) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// workDir is dir, created, or a temp folder removed when the test ends.
func workDir(tb testing.TB, dir, pattern string) string {
	tb.Helper()
	if dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			tb.Fatal(err)
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			tb.Fatal(err)
		}
		return abs
	}
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// tail is the last lines of b.
func tail(b []byte, lines int) string {
	parts := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
