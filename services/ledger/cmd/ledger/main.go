// Command ledger runs the ledger service: settlement of analysed transfers,
// the DLT monitor, the outbox relay and the accounts API.
//
// Usage:
//
//	ledger           run the service until SIGINT or SIGTERM (migrations first, unless MIGRATE_ON_START=false)
//	ledger migrate   apply the database migrations and exit
//	ledger --help    print this usage and every variable
//
// Configuration is read from the environment: "ledger --help" lists every
// variable (ledger.Variables).
// LOG_LEVEL (debug, info, warn, error; default info) and LOG_FORMAT (json or
// text; default text on a terminal, json otherwise) shape the logs.
package main

import (
	"context"
	"io"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/ledger"
)

func main() { platform.Exit("ledger", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return platform.Main(ctx, args, getenv, stdout, platform.Binary[ledger.Config]{
		Service:     ledger.Service,
		Config:      ledger.ConfigFromEnv,
		Variables:   ledger.Variables,
		DatabaseURL: func(c ledger.Config) string { return c.DatabaseURL },
		Run:         ledger.Run,
	})
}
