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

	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
)

// services are the suite's services, each with its own database.
var services = []string{"transfers", "antifraud", "ledger", "notifications"}

func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: payments %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

func orEnv(v, name string, getenv func(string) string) string {
	if v != "" {
		return v
	}
	return getenv(name)
}

func topicsCreate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("topics create", "topics create [--brokers host:port,...] [--replication-factor N] [--partitions N]", stdout)
	brokers := fs.String("brokers", "", "Kafka brokers (default $KAFKA_BROKERS, then localhost:9092)")
	rf := fs.Int("replication-factor", 1, "replication factor: 1 in development, 3 in production")
	partitions := fs.Int("partitions", 12, "partitions per topic")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *rf < 1 || *partitions < 1 {
		return usageError{"--replication-factor and --partitions must be at least 1"}
	}
	list := orEnv(*brokers, "KAFKA_BROKERS", getenv)
	if list == "" {
		list = "localhost:9092"
	}
	specs := broker.SuiteTopics(events.DefaultTopics, *rf)
	for i := range specs {
		specs[i].Partitions = *partitions
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	created, err := broker.CreateTopics(ctx, broker.Config{Brokers: broker.ParseBrokers(list)}, specs)
	for _, s := range specs {
		state := "exists"
		if slices.Contains(created, s.Name) {
			state = "created"
		}
		fmt.Fprintf(stdout, "%-8s %s (partitions %d, replication factor %d, min.insync.replicas %d)\n",
			state, s.Name, s.Partitions, s.ReplicationFactor, min(2, s.ReplicationFactor))
	}
	return err
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("migrate", "migrate --service NAME [--database-url URL]", stdout)
	service := fs.String("service", "", "service whose migrations to apply: "+strings.Join(services, ", "))
	dbURL := fs.String("database-url", "", "the service's database (default $DATABASE_URL)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !slices.Contains(services, *service) {
		return usageError{"migrate: --service must be one of " + strings.Join(services, ", ")}
	}
	db, err := openDB(ctx, *dbURL, getenv)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx, migrations.ForService(*service)...); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrations of %s applied\n", *service)
	return nil
}

func openDB(ctx context.Context, url string, getenv func(string) string) (*postgres.DB, error) {
	url = orEnv(url, "DATABASE_URL", getenv)
	if url == "" {
		return nil, usageError{"--database-url or $DATABASE_URL is required"}
	}
	return postgres.Open(ctx, url, 2)
}

func outboxListDead(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("outbox list-dead", "outbox list-dead [--database-url URL] [--limit N]", stdout)
	dbURL := fs.String("database-url", "", "the service's database (default $DATABASE_URL)")
	limit := fs.Int("limit", 100, "how many events at most")
	if err := parse(fs, args); err != nil {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.ID, d.Topic, d.Key, d.Type, d.Attempts, d.Refusals,
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
	operator = orEnv(operator, "PAYMENTS_OPERATOR", getenv)
	operator = orEnv(operator, "USER", getenv)
	if operator == "" {
		return outbox.Audit{}, usageError{"--operator, $PAYMENTS_OPERATOR or $USER is required: the action is audited"}
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
	fs := newFlags("outbox requeue", "outbox requeue [--database-url URL] (--id UUID | --topic T | --type T) [--operator NAME] [--reason TEXT]", stdout)
	dbURL := fs.String("database-url", "", "the service's database (default $DATABASE_URL)")
	id := fs.String("id", "", "requeue this event")
	topic := fs.String("topic", "", "requeue every DEAD event of this topic")
	typ := fs.String("type", "", "requeue every DEAD event of this type")
	operator, reason := auditFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	var f outbox.RequeueFilter
	if *id != "" {
		u, err := uuid.Parse(*id)
		if err != nil {
			return usageError{"--id: not a UUID"}
		}
		f.ID = u
	}
	f.Topic, f.Type = *topic, *typ
	if f.ID == uuid.Nil && f.Topic == "" && f.Type == "" {
		return usageError{"outbox requeue: give --id, --topic or --type"}
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
	fs := newFlags("outbox discard", "outbox discard [--database-url URL] --id UUID [--operator NAME] [--reason TEXT]", stdout)
	dbURL := fs.String("database-url", "", "the service's database (default $DATABASE_URL)")
	id := fs.String("id", "", "the DEAD event to drop for good")
	operator, reason := auditFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *id == "" {
		return usageError{"outbox discard: give --id"}
	}
	u, err := uuid.Parse(*id)
	if err != nil {
		return usageError{"--id: not a UUID"}
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
	fs := newFlags("probe", "probe URL", stdout)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() != 1 {
		return usageError{"probe: give exactly one URL"}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		return usageError{"probe: " + err.Error()}
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

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
