package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/paysuite/payments/services/suite/internal/cli"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/pkg/postgres"
)

// services are the suite's services, each with its own database.
var services = []string{"transfers", "antifraud", "ledger", "notifications"}

func topicsCreate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "topics create", "topics create [--brokers host:port,...] [--replication-factor N] [--partitions N] [--acls [--principals service=User:name,...]]", stdout)
	brokers := fs.String("brokers", "", "Kafka brokers (default $KAFKA_BROKERS, then "+broker.DefaultAddr+")")
	rf := fs.Int("replication-factor", 1, "replication factor: 1 in development, 3 in production")
	partitions := fs.Int("partitions", 12, "partitions per topic")
	acls := fs.Bool("acls", false, "also create the least-privilege ACLs of each service's principal (needs an admin credential in $KAFKA_SASL_*)")
	principals := fs.String("principals", "", "with --acls: service=User:name pairs overriding the default principals User:transfers, User:antifraud, User:ledger, User:notifications")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *rf < 1 || *partitions < 1 {
		return cli.UsageError{Msg: "--replication-factor and --partitions must be at least 1"}
	}
	who := broker.DefaultPrincipals
	if *principals != "" {
		if !*acls {
			return cli.UsageError{Msg: "--principals needs --acls"}
		}
		var err error
		if who, err = parsePrincipals(*principals); err != nil {
			return cli.UsageError{Msg: err.Error()}
		}
	}
	list := cli.OrEnv(*brokers, "KAFKA_BROKERS", getenv)
	if list == "" {
		list = broker.DefaultAddr
	}
	sec, err := broker.SecurityFromEnv(getenv)
	if err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	cfg := broker.Config{Brokers: broker.ParseBrokers(list), Security: sec}
	specs := broker.SuiteTopics(events.DefaultTopics, *rf)
	for i := range specs {
		specs[i].Partitions = *partitions
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	created, err := broker.CreateTopics(ctx, cfg, specs)
	for _, s := range specs {
		state := "exists"
		if slices.Contains(created, s.Name) {
			state = "created"
		}
		fmt.Fprintf(stdout, "%-8s %s (partitions %d, replication factor %d, min.insync.replicas %d)\n",
			state, s.Name, s.Partitions, s.ReplicationFactor, min(2, s.ReplicationFactor))
	}
	if err != nil || !*acls {
		return err
	}
	want := broker.SuiteACLs(events.DefaultTopics, broker.DefaultGroups, who)
	if err := broker.CreateACLs(ctx, cfg, want); err != nil {
		return err
	}
	for _, a := range want {
		fmt.Fprintf(stdout, "acl      allow %s\n", a)
	}
	return nil
}

// parsePrincipals reads "transfers=User:a,ledger=User:b": the services not
// named keep their default principal.
func parsePrincipals(s string) (broker.Principals, error) {
	p := broker.DefaultPrincipals
	for _, pair := range strings.Split(s, ",") {
		name, principal, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !strings.HasPrefix(principal, "User:") || len(principal) == len("User:") {
			return p, fmt.Errorf("--principals: %q is not service=User:name", pair)
		}
		switch name {
		case "transfers":
			p.Transfers = principal
		case "antifraud":
			p.Antifraud = principal
		case "ledger":
			p.Ledger = principal
		case "notifications":
			p.Notifications = principal
		default:
			return p, fmt.Errorf("--principals: unknown service %q (want %s)", name, strings.Join(services, ", "))
		}
	}
	return p, nil
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "migrate", "migrate --service NAME [--database-url-file FILE]", stdout)
	service := fs.String("service", "", "service whose migrations to apply: "+strings.Join(services, ", "))
	dbURL := fs.String("database-url-file", "", "a file holding the service's database URL (default $DATABASE_URL)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if !slices.Contains(services, *service) {
		return cli.UsageError{Msg: "migrate: --service must be one of " + strings.Join(services, ", ")}
	}
	url, err := databaseURL(*dbURL, getenv)
	if err != nil {
		return err
	}
	if err := platform.MigrateURL(ctx, url, *service); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrations of %s applied\n", *service)
	return nil
}

// openDB opens the database named by $DATABASE_URL or by the file given:
// a URL with a password never goes on the command line.
func openDB(ctx context.Context, file string, getenv func(string) string) (*postgres.DB, error) {
	url, err := databaseURL(file, getenv)
	if err != nil {
		return nil, err
	}
	return postgres.Open(ctx, url, 2)
}

// databaseURL is $DATABASE_URL or the content of file.
func databaseURL(file string, getenv func(string) string) (string, error) {
	url, err := cli.SecretValue(file, "DATABASE_URL", getenv)
	if err != nil {
		return "", err
	}
	if url == "" {
		return "", cli.UsageError{Msg: "$DATABASE_URL or --database-url-file is required"}
	}
	return url, nil
}

func outboxListDead(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "outbox list-dead", "outbox list-dead [--database-url-file FILE] [--limit N]", stdout)
	dbURL := fs.String("database-url-file", "", "a file holding the service's database URL (default $DATABASE_URL)")
	limit := fs.Int("limit", 100, "how many events at most")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	db, err := openDB(ctx, *dbURL, getenv)
	if err != nil {
		return err
	}
	defer db.Close()
	dead, err := outbox.New(db).ListDead(ctx, *limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOPIC\tKEY\tTYPE\tATTEMPTS\tREFUSALS\tENQUEUED\tLAST ERROR")
	for _, d := range dead {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.ID, oneLine(d.Topic, 255), oneLine(d.Key, 255), oneLine(d.Type, 255), d.Attempts, d.Refusals,
			d.EnqueuedAt.UTC().Format(time.RFC3339), oneLine(d.LastError, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d dead event(s)\n", len(dead))
	return nil
}

// auditFlags adds the flags every audited operator command takes.
func auditFlags(fs *flag.FlagSet) (operator, reason *string) {
	operator = fs.String("operator", "", "who does this, for the audit (default $PAYMENTS_OPERATOR, then $USER)")
	reason = fs.String("reason", "", "why, for the audit (a ticket, a sentence)")
	return operator, reason
}

func audit(operator, reason string, getenv func(string) string) (outbox.Audit, error) {
	operator = cli.OrEnv(operator, "PAYMENTS_OPERATOR", getenv)
	operator = cli.OrEnv(operator, "USER", getenv)
	if operator == "" {
		return outbox.Audit{}, cli.UsageError{Msg: "--operator, $PAYMENTS_OPERATOR or $USER is required: the action is audited"}
	}
	return outbox.Audit{Operator: operator, Reason: reason}, nil
}

// auditLine prints what was done, by whom, when: the same facts the
// outbox_audit table keeps.
func auditLine(stdout io.Writer, action string, a outbox.Audit, what string, n int64) error {
	_, err := fmt.Fprintf(stdout, "audit: at=%s operator=%q action=%s %s events=%d reason=%q\n",
		time.Now().UTC().Format(time.RFC3339), a.Operator, action, what, n, a.Reason)
	return err
}

func outboxRequeue(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "outbox requeue", "outbox requeue [--database-url-file FILE] (--id UUID | --topic T | --type T) [--operator NAME] [--reason TEXT]", stdout)
	dbURL := fs.String("database-url-file", "", "a file holding the service's database URL (default $DATABASE_URL)")
	id := fs.String("id", "", "requeue this event")
	topic := fs.String("topic", "", "requeue every DEAD event of this topic")
	typ := fs.String("type", "", "requeue every DEAD event of this type")
	operator, reason := auditFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var f outbox.RequeueFilter
	if *id != "" {
		u, err := uuid.Parse(*id)
		if err != nil {
			return cli.UsageError{Msg: "--id: not a UUID"}
		}
		f.ID = u
	}
	f.Topic, f.Type = *topic, *typ
	if f.ID == uuid.Nil && f.Topic == "" && f.Type == "" {
		return cli.UsageError{Msg: "outbox requeue: give --id, --topic or --type"}
	}
	a, err := audit(*operator, *reason, getenv)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, *dbURL, getenv)
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := outbox.New(db).Requeue(ctx, f, a)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("no DEAD event matched")
	}
	if err := auditLine(stdout, "requeue", a, fmt.Sprintf("id=%q topic=%q type=%q", *id, f.Topic, f.Type), n); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%d event(s) requeued; the service's relay publishes them before the later events of their keys\n", n)
	return err
}

func outboxDiscard(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "outbox discard", "outbox discard [--database-url-file FILE] --id UUID [--operator NAME] [--reason TEXT]", stdout)
	dbURL := fs.String("database-url-file", "", "a file holding the service's database URL (default $DATABASE_URL)")
	id := fs.String("id", "", "the DEAD event to drop for good")
	operator, reason := auditFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *id == "" {
		return cli.UsageError{Msg: "outbox discard: give --id"}
	}
	u, err := uuid.Parse(*id)
	if err != nil {
		return cli.UsageError{Msg: "--id: not a UUID"}
	}
	a, err := audit(*operator, *reason, getenv)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, *dbURL, getenv)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := outbox.New(db).Discard(ctx, u, a); err != nil {
		return err
	}
	if err := auditLine(stdout, "discard", a, fmt.Sprintf("id=%q", *id), 1); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, "event discarded; the later events of its key go on")
	return err
}

func probe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "probe", "probe URL", stdout)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cli.UsageError{Msg: err.Error()}
	}
	if fs.NArg() != 1 {
		return cli.UsageError{Msg: "probe: give exactly one URL"}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		return cli.UsageError{Msg: "probe: " + err.Error()}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", fs.Arg(0), resp.StatusCode)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// oneLine makes s one printable line of at most n runes: runs of spaces
// folded, control and bidirectional characters escaped (printable).
func oneLine(s string, n int) string {
	s = printable(strings.Join(strings.Fields(s), " "))
	if utf8.RuneCountInString(s) > n {
		return string([]rune(s)[:n-1]) + "…"
	}
	return s
}
