// Command console runs the operator console (see package console).
//
// Usage:
//
//	console           run the console
//	console --help    print this usage and every variable
//
// Configuration is read from the environment: "console --help" lists every
// variable (console.Variables). LOG_LEVEL and LOG_FORMAT shape the logs as
// in every service.
package main

import (
	"context"
	"io"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/console"
)

func main() { platform.Exit("console", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return platform.Main(ctx, args, getenv, stdout, platform.Binary[console.Config]{
		Service:   console.Service,
		Config:    console.ConfigFromEnv,
		Variables: console.Variables,
		Run:       console.Run, // no database: no migrate command
	})
}
