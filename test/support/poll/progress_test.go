package poll_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/test/support/poll"
)

func TestWhileProgressing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cond     func(look int) (bool, int64)
		wantFail string
	}{
		{name: "progresses until done", cond: func(look int) (bool, int64) { return look == 20, int64(look) }},
		{name: "stalls", cond: func(int) (bool, int64) { return false, 7 }, wantFail: "no progress for"},
		{name: "progresses but never ends", cond: func(look int) (bool, int64) { return false, int64(look) }, wantFail: "not done after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTB{TB: t}
			look := 0
			func() {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(stop); !ok {
							panic(r)
						}
					}
				}()
				poll.WhileProgressing(f, 200*time.Millisecond, time.Second, "the flow", func() (bool, int64, string) {
					look++
					done, progress := tt.cond(look)
					return done, progress, "state"
				})
			}()
			if tt.wantFail == "" && f.msg != "" {
				t.Fatalf("failed: %s", f.msg)
			}
			if tt.wantFail != "" && !strings.Contains(f.msg, tt.wantFail) {
				t.Fatalf("failure = %q, want it to mention %q", f.msg, tt.wantFail)
			}
		})
	}
}
