// Command console runs the operator console (see package console).
//
// Configuration is read from the environment: "console --help" lists every
// variable (console.Variables). LOG_LEVEL and LOG_FORMAT shape the logs as
// in every service.
package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/console"
)

func main() { platform.Exit("console", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	usage := fmt.Sprintf("usage:\n  %[1]s          run the console\n  %[1]s --help   print this help\n", args[0])
	if len(args) == 2 && (args[1] == "help" || args[1] == "-h" || args[1] == "-help" || args[1] == "--help") {
		return platform.Help(stdout, usage, append(console.Variables(), envconfig.Vars(platform.LogConfig{})...))
	}
	if len(args) > 1 {
		return fmt.Errorf("unknown command %q; %s", args[1:], usage)
	}
	cfg, err := console.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	log, err := platform.LoggerFromEnv(getenv, stdout)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "configuration", "service", console.Service, "config", envconfig.LogValue(cfg))
	return console.Run(ctx, cfg, log, func(a net.Addr) {
		log.InfoContext(ctx, "listening", "service", console.Service, "addr", a.String())
	})
}
