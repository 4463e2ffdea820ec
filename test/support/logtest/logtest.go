// Package logtest captures what a component logs while a test runs, for
// the test to read back: a buffer safe for a server's goroutines and the
// audit records of a JSON log.
package logtest

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is a log sink that many goroutines may write while a test reads
// it.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Audits returns the "audit" group of every line of the JSON log whose
// message is "audit", in order; it fails tb on a line that is not JSON.
func Audits(tb testing.TB, log string) []map[string]any {
	tb.Helper()
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			tb.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "audit" {
			got = append(got, rec["audit"].(map[string]any))
		}
	}
	return got
}
