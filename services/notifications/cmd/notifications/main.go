// Command notifications runs the notifications service.
//
//	notifications            serve (HTTP health and metrics, consumers)
//	notifications migrate    apply the database migrations and exit
//
// Configuration comes from the environment; see notifications.ConfigFromEnv.
// LOG_LEVEL (debug, info, warn, error; default info) and LOG_FORMAT (json or
// text; default json, text on a terminal) set up the log.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/notifications"
)

func main() { platform.Exit("notifications", run) }

const usage = `Usage:
  notifications            run the service
  notifications migrate    apply the database migrations and exit
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := ""
	if len(args) > 1 {
		cmd = args[1]
	}
	switch cmd {
	case "-h", "-help", "--help", "help":
		_, err := io.WriteString(stdout, usage)
		return err
	case "", "serve", "migrate":
	default:
		_, _ = io.WriteString(stdout, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	log, err := platform.LoggerFromEnv(getenv, stdout)
	if err != nil {
		return err
	}
	if cmd == "migrate" {
		return migrate(ctx, getenv, log)
	}
	cfg, err := notifications.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	defer platform.StartTracing(ctx, notifications.Service, getenv, log)()
	return notifications.Run(ctx, cfg, log, func(addr net.Addr) {
		log.InfoContext(ctx, "listening", "addr", addr.String())
	})
}

func migrate(ctx context.Context, getenv func(string) string, log *slog.Logger) error {
	env := platform.NewEnv(getenv)
	dsn := env.Required("DATABASE_URL")
	if err := env.Err(); err != nil {
		return err
	}
	db, err := postgres.Open(ctx, dsn, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx, migrations.ForService(notifications.Service)...); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	log.InfoContext(ctx, "migrations applied", "service", notifications.Service)
	return nil
}
