package platform

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/paysuite/payments/pkg/envconfig"
)

// Binary describes a service binary for Main.
type Binary[C any] struct {
	// Service names the service and its migration set.
	Service string
	// Config reads the service's configuration.
	Config func(getenv func(string) string) (C, error)
	// Variables are the variables Config reads, for the help.
	Variables func() []envconfig.Var
	// DatabaseURL picks the database of a configuration; nil for a
	// binary without a database (the console), which has no "migrate".
	DatabaseURL func(C) string
	// Run runs the service until ctx ends.
	Run func(ctx context.Context, cfg C, log *slog.Logger, listening func(net.Addr)) error
}

// Main is the body of every service binary, the one command dispatcher of
// the services: with no argument it runs the service until ctx ends
// (tracing on when the OTEL_* variables ask); "migrate" applies the
// service's migrations and exits, after the same configuration checks as a
// run (for a binary with a database); "help" (or -h, --help) prints the usage and every variable, with its
// default and description, from the service's declaration. Before running
// or migrating it logs the effective configuration, secrets masked, in one
// "configuration" line. The operator commands (topics, outbox, DLT)
// are the operator CLI's, services/suite/cmd/payments.
func Main[C any](ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, b Binary[C]) error {
	cmd := ""
	if len(args) > 1 {
		cmd = args[1]
	}
	migrates := b.DatabaseURL != nil
	usage := fmt.Sprintf("usage:\n  %[1]s           run the service\n", args[0])
	if migrates {
		usage += fmt.Sprintf("  %[1]s migrate   apply the database migrations and exit\n", args[0])
	}
	usage += fmt.Sprintf("  %[1]s --help    print this help\n", args[0])
	switch {
	case len(args) == 2 && (cmd == "help" || cmd == "-h" || cmd == "-help" || cmd == "--help"):
		return Help(stdout, usage, append(b.Variables(), envconfig.Vars(LogConfig{})...))
	case (cmd != "" && (cmd != "migrate" || !migrates)) || len(args) > 2:
		return fmt.Errorf("unknown command %q; %s", args[1:], usage)
	}
	cfg, err := b.Config(getenv)
	if err != nil {
		return err
	}
	log, err := LoggerFromEnv(getenv, stdout)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "configuration", "service", b.Service, "config", envconfig.LogValue(cfg))
	if cmd == "migrate" {
		if err := MigrateURL(ctx, b.DatabaseURL(cfg), b.Service); err != nil {
			return err
		}
		log.InfoContext(ctx, "migrations applied", "service", b.Service)
		return nil
	}
	defer StartTracing(ctx, b.Service, getenv, log)()
	log.InfoContext(ctx, "starting", "service", b.Service)
	return b.Run(ctx, cfg, log, func(a net.Addr) {
		log.InfoContext(ctx, "listening", "service", b.Service, "addr", a.String())
	})
}

// Help writes usage, then the environment variables vars and the
// OpenTelemetry ones.
func Help(w io.Writer, usage string, vars []envconfig.Var) error {
	if _, err := io.WriteString(w, usage+"\nenvironment:\n"); err != nil {
		return err
	}
	if err := envconfig.Usage(w, vars); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\nOTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_TRACES_EXPORTER and\n"+
		"OTEL_SERVICE_NAME (standard OpenTelemetry variables) turn on trace export.\n")
	return err
}

// Exit is the main function of every service binary: it calls run with
// os.Args and the environment, under a context cancelled by SIGINT or
// SIGTERM (run returns once its service has shut down, in the order
// Serve states), and exits 1 with the error on stderr, prefixed by name,
// when run fails. A second signal during the shutdown ends the process at
// once.
func Exit(name string, run func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the next signal has its default effect
	}()
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
