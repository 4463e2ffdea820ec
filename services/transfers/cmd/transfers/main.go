// Command transfers runs the transfers service: the HTTP API of
// /transferencias, the outbox relay and the status projection.
//
// Usage:
//
//	transfers           run the service (migrations first, unless MIGRATE_ON_START=false)
//	transfers migrate   apply the database migrations and exit
//	transfers --help    print this usage and every variable
//
// Configuration is read from the environment: "transfers --help" lists
// every variable (transfers.Variables). LOG_LEVEL (debug, info, warn, error; default info) and LOG_FORMAT (json or
// text; default text on a terminal, json otherwise) shape the logs.
package main

import (
	"context"
	"io"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/transfers"
)

func main() { platform.Exit("transfers", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return platform.Main(ctx, args, getenv, stdout, platform.Binary[transfers.Config]{
		Service:     transfers.Service,
		Config:      transfers.ConfigFromEnv,
		Variables:   transfers.Variables,
		DatabaseURL: func(c transfers.Config) string { return c.DatabaseURL },
		Run:         transfers.Run,
	})
}
