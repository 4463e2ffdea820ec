// Command payments is the suite's operator CLI, shipped in the production
// image (the development runner, run and demo, is payments-dev):
//
//	payments topics create     create the Kafka topics of CONTRACTS.md
//	payments migrate           apply a service's database migrations
//	payments outbox list-dead  list DEAD outbox events of a service
//	payments outbox requeue    move DEAD outbox events back to PENDING (audited)
//	payments outbox discard    drop a DEAD outbox event for good (audited)
//	payments dlt list|replay   inspect and replay dead-letter topics
//	payments probe URL         exit 0 when URL answers 200 (container health checks)
//	payments auth keygen       make the suite's own Ed25519 token signing key and JWKS
//	payments auth token        print a signed access token for a client and scopes
//	payments auth transfer-keygen make the transfers service's authorization key and the ledger's JWKS
//
// Every subcommand takes --help.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/suite/internal/cli"
)

func main() { cli.Main("payments", run) }

const usage = `usage: payments <command> [flags]

commands:
  topics create          create the Kafka topics (idempotent)
  migrate                apply a service's database migrations
  outbox list-dead       list DEAD outbox events of a service's database
  outbox requeue         requeue DEAD outbox events (by id, topic or type; audited)
  outbox discard         drop a DEAD outbox event for good (by id; audited)
  dlt list               list records of a dead-letter topic
  dlt replay             replay dead-letter records to their DLT's main topic
  probe URL              exit 0 when URL answers 200
  auth keygen            make a token signing key and its public JWKS
  auth token             print an access token for a client and scopes
  auth transfer-keygen   make the transfers service's authorization key and the ledger's JWKS

Run "payments <command> --help" for the flags of a command. The development
runner (run, demo: the suite in one process) is payments-dev, not in the image.
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
	sub := func() (string, []string, error) {
		if len(rest) == 0 || rest[0] == "-h" || rest[0] == "--help" {
			fmt.Fprint(stdout, usage)
			if len(rest) == 0 {
				return "", nil, cli.UsageError{Msg: cmd + ": which subcommand?"}
			}
			return "", nil, flag.ErrHelp
		}
		return rest[0], rest[1:], nil
	}
	switch cmd {
	case "run", "demo":
		return cli.UsageError{Msg: cmd + " moved to the development binary payments-dev (go run ./services/suite/cmd/payments-dev " + cmd +
			", or make " + cmd + "); it is not in the production image"}
	case "probe":
		return probe(ctx, rest, stdout)
	case "migrate":
		return migrate(ctx, rest, getenv, stdout)
	case "topics":
		s, r, err := sub()
		if err != nil {
			return err
		}
		if s != "create" {
			return cli.UsageError{Msg: "topics: unknown subcommand " + s}
		}
		return topicsCreate(ctx, r, getenv, stdout)
	case "outbox":
		s, r, err := sub()
		if err != nil {
			return err
		}
		switch s {
		case "list-dead":
			return outboxListDead(ctx, r, getenv, stdout)
		case "requeue":
			return outboxRequeue(ctx, r, getenv, stdout)
		case "discard":
			return outboxDiscard(ctx, r, getenv, stdout)
		}
		return cli.UsageError{Msg: "outbox: unknown subcommand " + s}
	case "dlt":
		// A hold's topics have DLTs too: reservada's and cancelada's
		// (notifications), the two command topics' (the ledger).
		return dltCommand(ctx, rest, getenv, stdout, slices.Concat(events.DefaultTopics.All(), events.DefaultTopics.Holds(), events.DefaultTopics.Refunds()))
	case "auth":
		s, r, err := sub()
		if err != nil {
			return err
		}
		return authCommand(ctx, s, r, getenv, stdout)
	}
	return cli.UsageError{Msg: "unknown command " + cmd}
}
