// Command ledger runs the ledger service: settlement of analysed transfers,
// the DLT monitor, the outbox relay and the accounts API.
//
// Usage:
//
//	ledger           run the service until SIGINT or SIGTERM (migrations first, unless MIGRATE_ON_START=false)
//	ledger migrate   apply the database migrations and exit
//
// Configuration is read from the environment; see ledger.ConfigFromEnv.
// LOG_LEVEL (debug, info, warn, error; default info) and LOG_FORMAT (json or
// text; default text on a terminal, json otherwise) shape the logs.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/ledger"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := ""
	if len(args) > 1 {
		cmd = args[1]
	}
	if (cmd != "" && cmd != "migrate") || len(args) > 2 {
		return fmt.Errorf("usage: %s [migrate]", args[0])
	}
	cfg, err := ledger.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	log, err := platform.LoggerFromEnv(getenv, stdout)
	if err != nil {
		return err
	}
	if cmd == "migrate" {
		db, err := postgres.Open(ctx, cfg.DatabaseURL, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.Migrate(ctx, migrations.ForService(ledger.Service)...); err != nil {
			return err
		}
		log.InfoContext(ctx, "migrations applied", "service", ledger.Service)
		return nil
	}
	defer platform.StartTracing(ctx, ledger.Service, getenv, log)()
	return ledger.Run(ctx, cfg, log, nil)
}
