// Command console runs the operator console (see package console).
//
// Configuration is read from the environment; see console.ConfigFromEnv.
// LOG_LEVEL and LOG_FORMAT shape the logs as in every service.
package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/console"
)

func main() { platform.Exit("console", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unknown command %q; usage: %s", args[1:], args[0])
	}
	cfg, err := console.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	log, err := platform.LoggerFromEnv(getenv, stdout)
	if err != nil {
		return err
	}
	return console.Run(ctx, cfg, log, func(a net.Addr) {
		log.InfoContext(ctx, "listening", "service", console.Service, "addr", a.String())
	})
}
