package background_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/paysuite/payments/test/support/background"
)

// fakeTB records Errorf and Cleanup instead of acting on the real test.
type fakeTB struct {
	testing.TB
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestGoStopsAtCleanupAndReportsTheError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		onStop  error
		wantErr string
	}{
		{name: "returns nil on cancellation", onStop: nil, wantErr: ""},
		{name: "returns an error on cancellation", onStop: errors.New("commit refused"), wantErr: "relay returned commit refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTB{TB: t}
			task := background.Go(f, "relay", func(ctx context.Context) error {
				<-ctx.Done()
				return tt.onStop
			})
			select {
			case <-task.Done():
				t.Fatal("the task returned before its context was cancelled")
			default:
			}
			f.end()
			<-task.Done()
			got := strings.Join(f.errs, "; ")
			if (tt.wantErr == "") != (got == "") || !strings.Contains(got, tt.wantErr) {
				t.Errorf("failures = %q, want %q", got, tt.wantErr)
			}
			task.Stop(f) // a second stop does nothing
			if len(f.errs) > 1 {
				t.Errorf("the second Stop reported again: %q", f.errs)
			}
		})
	}
}

func TestServeReturnsTheAddress(t *testing.T) {
	t.Parallel()
	want := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	addr, task := background.Serve(t, "service", func(ctx context.Context, listening func(net.Addr)) error {
		listening(want)
		<-ctx.Done()
		return nil
	})
	if addr.String() != want.String() {
		t.Errorf("addr = %v, want %v", addr, want)
	}
	task.Stop(t)
	if task.Err() != nil {
		t.Errorf("Err = %v", task.Err())
	}
}
