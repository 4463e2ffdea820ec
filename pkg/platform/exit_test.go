package platform_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/test/support/poll"
)

// TestMain lets a test run this binary as a service that never finishes
// its shutdown (PLATFORM_EXIT_CHILD=1).
func TestMain(m *testing.M) {
	if os.Getenv("PLATFORM_EXIT_CHILD") == "1" {
		platform.Exit("child", func(ctx context.Context, _ []string, _ func(string) string, stdout io.Writer) error {
			fmt.Fprintln(stdout, "running")
			<-ctx.Done()
			fmt.Fprintln(stdout, "stopping")
			select {} // a shutdown that hangs
		})
	}
	os.Exit(m.Run())
}

// The first SIGTERM starts the orderly shutdown; a second one ends the
// process at once, however long the shutdown would take.
func TestSecondSignalEndsTheProcess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$") //nolint:gosec // this test binary itself
	cmd.Env = append(os.Environ(), "PLATFORM_EXIT_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("child said %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	expect("running")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expect("stopping")
	// Signal again until the process ends: the first signal's handling
	// (restoring the default) may still be under way.
	exited := make(chan struct{})
	go func() {
		tick := time.NewTicker(poll.Interval)
		defer tick.Stop()
		for {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
				return
			case <-tick.C:
			}
		}
	}()
	err = cmd.Wait()
	close(exited)
	if ctx.Err() != nil {
		t.Fatal("the second SIGTERM did not end the process")
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("child ended with %v, want killed by SIGTERM", err)
	}
}
