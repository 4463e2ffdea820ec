// Command payments-dev is the suite's development runner. It is not in the
// production image (the Dockerfile builds the services and the operator
// CLI payments only); make run and make demo call it:
//
//	payments-dev run    the four services and the console in one process
//	payments-dev demo   run, plus a scripted flow with its results
//
// Without KAFKA_BROKERS (or --brokers) it starts franz-go's kfake, an
// in-process fake Kafka; with them it uses that cluster (make bench-e2e).
// Every subcommand takes --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "payments-dev:", err)
		}
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

const usage = `usage: payments-dev <command> [flags]

commands:
  run                    run the four services and the console in one process
  demo                   run them, then a scripted flow, printing results

The operator commands (topics, migrate, outbox, dlt, probe, auth) are in
the payments binary. Run "payments-dev <command> --help" for the flags of a
command.
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return usageError{"no command given"}
		}
		return nil
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runSuite(ctx, rest, getenv, stdout, stderr, false)
	case "demo":
		return runSuite(ctx, rest, getenv, stdout, stderr, true)
	}
	return usageError{"unknown command " + cmd + " (operator commands are in the payments binary)"}
}

func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: payments-dev %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

func orEnv(v, name string, getenv func(string) string) string {
	if v != "" {
		return v
	}
	return getenv(name)
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// secretValue reads a secret (a database URL) from file when given, else
// from the environment variable name: never from a flag, which any user
// of the machine sees in the process list.
func secretValue(file, name string, getenv func(string) string) (string, error) {
	if file == "" {
		return getenv(name), nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // the developer names the file
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	return strings.TrimSpace(string(b)), nil
}
