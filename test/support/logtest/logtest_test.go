package logtest_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/paysuite/payments/test/support/logtest"
)

// Writes from several goroutines while the buffer is read all arrive whole
// (and, under -race, without a data race).
func TestBufferTakesConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b logtest.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 800 {
		t.Errorf("%d lines written, want 800", n)
	}
}
