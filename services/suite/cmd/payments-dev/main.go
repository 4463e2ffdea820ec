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
	"fmt"
	"io"

	"github.com/paysuite/payments/services/suite/internal/cli"
)

func main() { cli.Main("payments-dev", run) }

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
			return cli.UsageError{Msg: "no command given"}
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
	return cli.UsageError{Msg: "unknown command " + cmd + " (operator commands are in the payments binary)"}
}
