// Package cli holds the command-line plumbing that the operator CLI
// (payments) and the development runner (payments-dev) share: the process
// entry, flag sets whose --help prints a synopsis, usage errors (exit
// status 2), and reading values from flags, the environment or files.
package cli

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

// Run is a command's body: args without the program name.
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments and environment until it
// returns or SIGINT/SIGTERM cancels its context, and exits with ExitCode.
func Main(prog string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, prog+":", err)
		}
		os.Exit(ExitCode(err))
	}
}

// ExitCode is 0 for --help, 2 for a UsageError, 1 for any other error.
func ExitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var u UsageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// UsageError is a mistake in the command line.
type UsageError struct{ Msg string }

func (u UsageError) Error() string { return u.Msg }

// NewFlags returns a flag set for "prog name" whose usage prints synopsis
// and the flags to stdout.
func NewFlags(prog, name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: %s %s\n\n", prog, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args into fs; a bad flag or a stray argument is a
// UsageError, --help is flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{Msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return UsageError{Msg: fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

// OrEnv is v, or the environment variable name when v is empty.
func OrEnv(v, name string, getenv func(string) string) string {
	if v != "" {
		return v
	}
	return getenv(name)
}

// FirstOf is the first non-empty of vs.
func FirstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// SecretValue reads a secret (a database URL) from file when given, else
// from the environment variable name: never from a flag, which any user
// of the machine sees in the process list.
func SecretValue(file, name string, getenv func(string) string) (string, error) {
	if file == "" {
		return getenv(name), nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // the operator names the file
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	return strings.TrimSpace(string(b)), nil
}
