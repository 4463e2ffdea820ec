package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDBURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://u:p@127.0.0.1:55432/postgres?sslmode=disable", "postgres://u:p@127.0.0.1:55432/payments_ledger?sslmode=disable"},
		{"postgres://u@h:5432", "postgres://u@h:5432/payments_ledger"},
		{"postgresql://h/db", "postgresql://h/payments_ledger"},
	}
	for _, tt := range tests {
		if got := dbURL(tt.in, "payments_ledger"); got != tt.want {
			t.Errorf("dbURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSummarise(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarise(ds)
	want := dist{n: 100, p50: 51 * time.Millisecond, p90: 91 * time.Millisecond, p99: 100 * time.Millisecond, max: 100 * time.Millisecond}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(dist{})); diff != "" {
		t.Errorf("summarise (-want +got):\n%s", diff)
	}
	if got := summarise(nil); got != (dist{}) {
		t.Errorf("summarise(nil) = %+v", got)
	}
}
