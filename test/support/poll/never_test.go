package poll_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/test/support/poll"
)

func TestNever(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		happensAt int // look number at which cond reports true; 0: never
		wantFail  bool
	}{
		{name: "nothing happens", happensAt: 0, wantFail: false},
		{name: "happens on the third look", happensAt: 3, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTB{TB: t}
			looks := 0
			start := time.Now()
			func() {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(stop); !ok {
							panic(r)
						}
					}
				}()
				poll.Never(f, 200*time.Millisecond, "the record handled", func() (bool, string) {
					looks++
					return looks == tt.happensAt, "handled"
				})
			}()
			if failed := f.msg != ""; failed != tt.wantFail {
				t.Fatalf("failed = %v (%q), want %v", failed, f.msg, tt.wantFail)
			}
			if tt.wantFail && !strings.Contains(f.msg, "the record handled happened") {
				t.Errorf("failure message = %q", f.msg)
			}
			if !tt.wantFail && time.Since(start) < 200*time.Millisecond {
				t.Errorf("returned after %v, before the window ended", time.Since(start))
			}
		})
	}
}
