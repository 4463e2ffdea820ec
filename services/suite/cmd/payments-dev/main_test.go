package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/services/suite/internal/cli"
)

// runCLI runs the command line as main does and returns its exit code and
// output.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	if err == nil {
		return 0, out.String(), errOut.String(), nil
	}
	return cli.ExitCode(err), out.String(), errOut.String(), err
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"run", "--help"}, {"demo", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, _, err := runCLI(t, nil, args...)
			if code != 0 {
				t.Errorf("exit code %d (err %v), want 0", code, err)
			}
			if !strings.Contains(stdout, "usage: payments-dev") {
				t.Errorf("stdout has no usage:\n%s", stdout)
			}
		})
	}
}

func TestCommandLineMistakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{nil, 2, "no command given"},
		{[]string{"migrate"}, 2, "operator commands are in the payments binary"},
		{[]string{"run", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"run"}, 2, "$DATABASE_URL or --database-url-file"},
		{[]string{"demo", "--against", "http://localhost:1"}, 2, "demo --against needs --ledger"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, _, err := runCLI(t, nil, tt.args...)
			if code != tt.wantCode || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("exit %d, err %v; want exit %d and an error containing %q", code, err, tt.wantCode, tt.wantErr)
			}
		})
	}
}
