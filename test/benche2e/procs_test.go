package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestReadUsageCountsReapedChildren: a child that ran and was waited for
// leaves its CPU time in the parent's reaped time, which serverUsage adds
// for the postmaster so that PostgreSQL's CPU never drops when a backend
// exits.
func TestReadUsageCountsReapedChildren(t *testing.T) {
	before, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A child that burns about half a second of CPU and exits.
	cmd := exec.CommandContext(t.Context(), "sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	after, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := after.reaped - before.reaped; got <= 0 {
		t.Fatalf("reaped CPU grew by %s after a busy child exited; want > 0 (child used %s)", got,
			cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
}
