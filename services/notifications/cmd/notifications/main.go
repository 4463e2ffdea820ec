// Command notifications runs the notifications service.
//
// Usage:
//
//	notifications            run the service until SIGINT or SIGTERM
//	notifications migrate    apply the database migrations and exit
//	notifications --help     print this usage and every variable
//
// Configuration comes from the environment: "notifications --help" lists
// every variable (notifications.Variables).
// LOG_LEVEL (debug, info, warn, error; default info) and LOG_FORMAT (json or
// text; default json, text on a terminal) set up the log. The DLT tooling is
// the operator CLI's: payments dlt list|replay.
package main

import (
	"context"
	"io"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/notifications"
)

func main() { platform.Exit("notifications", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return platform.Main(ctx, args, getenv, stdout, platform.Binary[notifications.Config]{
		Service:     notifications.Service,
		Config:      notifications.ConfigFromEnv,
		Variables:   notifications.Variables,
		DatabaseURL: func(c notifications.Config) string { return c.DatabaseURL },
		Run:         notifications.Run,
	})
}
