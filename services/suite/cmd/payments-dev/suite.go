package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paysuite/payments/services/suite/internal/cli"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/suite"
)

// runSuite is "payments-dev run" and "payments-dev demo".
func runSuite(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, demo bool) error {
	name, synopsis := "run", "run [--database-url-file FILE] [--brokers host:port,...]"
	if demo {
		name, synopsis = "demo", "demo [--database-url-file FILE] [--brokers host:port,...] [--key FILE] [--exit] | demo --against URL --ledger URL [--key FILE]"
	}
	fs := cli.NewFlags("payments-dev", name, synopsis, stdout)
	dbURLFile := fs.String("database-url-file", "", "a file holding the URL of a PostgreSQL server; each service gets its own database on it (default $DATABASE_URL)")
	brokers := fs.String("brokers", "", "Kafka brokers (default $KAFKA_BROKERS; empty: franz-go kfake, an in-process fake Kafka)")
	var against, ledgerURL, keyFile *string
	var exit *bool
	if demo {
		keyFile = fs.String("key", filepath.Join(auth.DevDir, auth.KeyFile), "the signing key of the demo's tokens (the services must trust its JWKS)")
		against = fs.String("against", "", "run only the script, against the transfers service at this URL (docker compose)")
		ledgerURL = fs.String("ledger", "", "with --against: the ledger service's URL")
		exit = fs.Bool("exit", false, "stop the services after the script instead of serving until interrupted")
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if demo && *against != "" {
		if *ledgerURL == "" {
			return cli.UsageError{Msg: "demo --against needs --ledger"}
		}
		d := &suite.Demo{Transfers: strings.TrimRight(*against, "/"), Ledger: strings.TrimRight(*ledgerURL, "/"), Out: stdout}
		if err := demoTokens(d, *keyFile, getenv); err != nil {
			return err
		}
		return d.Run(ctx)
	}
	url, err := cli.SecretValue(*dbURLFile, "DATABASE_URL", getenv)
	if err != nil {
		return err
	}
	if url == "" {
		return cli.UsageError{Msg: name + ": $DATABASE_URL or --database-url-file (a PostgreSQL server) is required; `make " + name + "` finds or starts one"}
	}
	getenv, err = devAuth(getenv, stdout)
	if err != nil {
		return err
	}
	level := getenv("LOG_LEVEL")
	if level == "" {
		level = "warn" // the demo's own lines are the output; raise for service logs
	}
	format := getenv("LOG_FORMAT")
	if format == "" && platform.IsTerminal(os.Stderr) {
		format = "text"
	}
	log, err := platform.NewLogger(stderr, format, level)
	if err != nil {
		return cli.UsageError{Msg: err.Error()}
	}
	defer platform.StartTracing(ctx, "payments", getenv, log)()
	opts := suite.Options{
		DatabaseURL: url,
		Brokers:     broker.ParseBrokers(cli.OrEnv(*brokers, "KAFKA_BROKERS", getenv)),
		Getenv:      getenv,
		Log:         log,
		Out:         stdout,
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	demoErr := make(chan error, 1)
	ready := func(ep suite.Endpoints) {
		fmt.Fprintf(stdout, "\nReady:\n  transfers      %s  (POST /transferencias, POST /transferencias/{id}/captura and /cancelamento, GET /transferencias/{id}, GET /openapi.yaml)\n"+
			"  ledger         %s  (POST /contas, POST /contas/{id}/depositos, GET /contas/{id}, GET /contas/{id}/lancamentos)\n"+
			"  antifraud      %s\n  notifications  %s\n  every service: /healthz /readyz /metrics\n"+
			"  console        %s  (operator console; sign in with a token of scope operacoes)\n",
			ep.Transfers, ep.Ledger, ep.Antifraud, ep.Notifications, ep.Console)
		if demo {
			if tok, err := operatorToken(*keyFile, getenv); err == nil {
				fmt.Fprintf(stdout, "\nConsole:    open %s and paste this sign-in token (operator %q, scope operacoes, valid 8 h):\n%s\n",
					ep.Console, suite.OperatorClient, tok)
			} else {
				fmt.Fprintf(stdout, "Console:    no sign-in token: %v\n", err)
			}
		}
		if !demo {
			fmt.Fprintln(stdout, "Press Ctrl+C to stop.")
			return
		}
		go func() {
			d := &suite.Demo{Transfers: ep.Transfers, Ledger: ep.Ledger, Out: stdout, Timeout: 2 * time.Minute}
			err := demoTokens(d, *keyFile, getenv)
			if err == nil {
				err = d.Run(ctx)
			}
			if err == nil && !*exit {
				d.Hint(stdout)
			}
			demoErr <- err
			if err != nil || *exit {
				cancel()
			}
		}()
	}
	runErr := suite.Run(ctx, opts, ready)
	select {
	case err := <-demoErr:
		if err != nil {
			return err
		}
	default:
		if demo && runErr == nil && ctx.Err() == nil {
			return errors.New("the suite stopped before the demo finished")
		}
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}
