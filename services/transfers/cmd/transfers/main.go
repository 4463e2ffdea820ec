// Command transfers runs the transfers service: the HTTP API of
// /transferencias, the outbox relay and the status projection.
//
// Usage:
//
//	transfers           run the service (migrations first, unless MIGRATE_ON_START=false)
//	transfers migrate   apply the database migrations and exit
//
// Configuration is read from the environment; see transfers.ConfigFromEnv.
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
	"github.com/paysuite/payments/services/transfers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "transfers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := ""
	if len(args) > 1 {
		cmd = args[1]
	}
	if cmd != "" && cmd != "migrate" {
		return fmt.Errorf("unknown command %q (want no command, or migrate)", cmd)
	}
	cfg, err := transfers.ConfigFromEnv(getenv)
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
		if err := db.Migrate(ctx, migrations.ForService(transfers.Service)...); err != nil {
			return err
		}
		log.InfoContext(ctx, "migrations applied", "service", transfers.Service)
		return nil
	}
	log.InfoContext(ctx, "starting", "service", transfers.Service, "http_addr", cfg.HTTPAddr)
	defer platform.StartTracing(ctx, transfers.Service, getenv, log)()
	return transfers.Run(ctx, cfg, log, nil)
}
