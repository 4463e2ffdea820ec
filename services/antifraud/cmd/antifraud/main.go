// Command antifraud runs the antifraud service.
//
//	antifraud           run the service until SIGINT or SIGTERM
//	antifraud migrate   apply the database migrations and exit
//
// Configuration comes from environment variables (see
// antifraud.ConfigFromEnv), plus LOG_LEVEL (debug, info, warn, error;
// default info) and LOG_FORMAT (json or text; default json, text on a
// terminal).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/antifraud"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "antifraud:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return platform.Main(ctx, args, getenv, stdout, platform.Binary[antifraud.Config]{
		Service:     antifraud.Service,
		Config:      antifraud.ConfigFromEnv,
		DatabaseURL: func(c antifraud.Config) string { return c.DatabaseURL },
		Run:         antifraud.Run,
	})
}
