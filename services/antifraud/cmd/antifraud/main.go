// Command antifraud runs the antifraud service.
//
//	antifraud           run the service until SIGINT or SIGTERM
//	antifraud migrate   apply the database migrations and exit
//	antifraud --help    print this usage and every variable
//
// Configuration comes from environment variables ("antifraud --help" lists
// every one: antifraud.Variables), plus LOG_LEVEL (debug, info, warn, error;
// default info) and LOG_FORMAT (json or text; default json, text on a
// terminal).
package main

import (
	"context"
	"io"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/antifraud"
)

func main() { platform.Exit("antifraud", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return platform.Main(ctx, args, getenv, stdout, platform.Binary[antifraud.Config]{
		Service:     antifraud.Service,
		Config:      antifraud.ConfigFromEnv,
		Variables:   antifraud.Variables,
		DatabaseURL: func(c antifraud.Config) string { return c.DatabaseURL },
		Run:         antifraud.Run,
	})
}
