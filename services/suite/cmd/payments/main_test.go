package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/suite/internal/cli"
	"github.com/paysuite/payments/test/support/background"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// runCLI runs the command line as main does and returns its exit code and
// output.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	if err == nil {
		return 0, out.String(), errOut.String(), nil
	}
	return cli.ExitCode(err), out.String(), errOut.String(), err
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	tests := [][]string{
		{"--help"},
		{"-h"},
		{"help"},
		{"probe", "--help"},
		{"migrate", "--help"},
		{"topics", "--help"},
		{"topics", "create", "--help"},
		{"outbox", "--help"},
		{"outbox", "list-dead", "--help"},
		{"outbox", "requeue", "--help"},
		{"outbox", "discard", "--help"},
		{"dlt", "--help"},
		{"dlt", "list", "--help"},
		{"dlt", "replay", "--help"},
		{"auth", "--help"},
		{"auth", "keygen", "--help"},
		{"auth", "token", "--help"},
		{"auth", "transfer-keygen", "--help"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, _, err := runCLI(t, nil, args...)
			if code != 0 {
				t.Errorf("exit code %d (err %v), want 0", code, err)
			}
			if !strings.Contains(strings.ToLower(stdout), "usage") {
				t.Errorf("stdout has no usage:\n%s", stdout)
			}
		})
	}
}

func TestCommandLineMistakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{nil, 2, "no command given"},
		{[]string{"frobnicate"}, 2, "unknown command frobnicate"},
		{[]string{"run"}, 2, "run moved to the development binary payments-dev"},
		{[]string{"demo", "--exit"}, 2, "demo moved to the development binary payments-dev"},
		{[]string{"topics"}, 2, "which subcommand"},
		{[]string{"topics", "delete"}, 2, "unknown subcommand delete"},
		{[]string{"outbox", "purge"}, 2, "unknown subcommand purge"},
		{[]string{"outbox", "requeue", "--database-url-file", "/dev/null"}, 2, "give --id, --topic or --type"},
		{[]string{"outbox", "list-dead", "--database-url", "postgres://x"}, 2, "flag provided but not defined"},
		{[]string{"outbox", "requeue", "--id", "not-a-uuid"}, 2, "not a UUID"},
		{[]string{"outbox", "list-dead"}, 2, "$DATABASE_URL or --database-url-file is required"},
		{[]string{"auth"}, 2, "which subcommand"},
		{[]string{"auth", "sign"}, 2, "unknown subcommand sign"},
		{[]string{"auth", "keygen"}, 2, "--out DIR is required"},
		{[]string{"auth", "transfer-keygen"}, 2, "--out DIR is required"},
		{[]string{"auth", "token", "--scopes", "contas:ler"}, 2, "--client NAME is required"},
		{[]string{"auth", "token", "--client", "c"}, 2, "--scopes is required"},
		{[]string{"auth", "token", "--client", "c", "--scopes", "contas:ler", "--ttl", "-1h"}, 2, "--ttl must be positive"},
		{[]string{"auth", "token", "--client", "c", "--scopes", "contas:ler", "--key", "/nonexistent/key.jwk"}, 1, "payments auth keygen makes one"},
		{[]string{"outbox", "requeue", "--id", "8a1c6f0e-5b7a-4a8e-9c1e-2f3d4b5a6c7d", "--database-url-file", "/dev/null"}, 2, "the action is audited"},
		{[]string{"outbox", "discard", "--database-url-file", "/dev/null"}, 2, "give --id"},
		{[]string{"outbox", "discard", "--id", "8a1c6f0e-5b7a-4a8e-9c1e-2f3d4b5a6c7d", "--database-url-file", "/dev/null"}, 2, "the action is audited"},
		{[]string{"outbox", "list-dead", "--limit", "many"}, 2, "invalid value"},
		{[]string{"outbox", "list-dead", "extra"}, 2, "unexpected argument"},
		{[]string{"migrate", "--service", "bank"}, 2, "--service must be one of"},
		{[]string{"topics", "create", "--partitions", "0"}, 2, "must be at least 1"},
		{[]string{"topics", "create", "--principals", "ledger=User:x"}, 2, "--principals needs --acls"},
		{[]string{"topics", "create", "--acls", "--principals", "bank=User:x"}, 2, `unknown service "bank"`},
		{[]string{"topics", "create", "--acls", "--principals", "ledger=x"}, 2, `"ledger=x" is not service=User:name`},
		{[]string{"probe"}, 2, "exactly one URL"},
		{[]string{"dlt", "purge"}, 1, "unknown command"},
		{[]string{"dlt"}, 1, "a command is required"},
	}
	for _, tc := range tests {
		name := strings.Join(tc.args, " ")
		if name == "" {
			name = "no arguments"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, _, _, err := runCLI(t, nil, tc.args...)
			if code != tc.wantCode || err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("exit %d, err %v; want exit %d and an error containing %q", code, err, tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want int
	}{
		{flag.ErrHelp, 0},
		{cli.UsageError{Msg: "bad flag"}, 2},
		{errors.New("broker down"), 1},
	}
	for _, tc := range tests {
		if got := cli.ExitCode(tc.err); got != tc.want {
			t.Errorf("cli.ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestOutboxListDeadAndRequeue makes a DEAD event in a database with the
// platform migrations, finds it with list-dead, requeues it, and sees an
// outbox relay publish it to Kafka.
func TestOutboxListDeadAndRequeue(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t, migrations.Platform)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := postgres.Wrap(pool)
	ob := outbox.New(db)
	topic := kafkatest.Topic(t, "payments-cli.requeue", 1)
	env := map[string]string{"DATABASE_URL": dsn}

	id := uuid.New()
	payload := `{"eventoId":"` + id.String() + `","transferenciaId":"` + uuid.NewString() + `","ocorridoEm":"2026-11-29T22:00:00Z"}`
	err = db.InTx(context.Background(), func(tx pgx.Tx) error {
		return ob.Enqueue(context.Background(), tx, events.Message{
			ID: id, AggregateType: "transferencia", AggregateID: id.String(), Topic: topic, Key: "CC-001",
			Type: events.TypeSettled, Payload: []byte(payload), Headers: map[string]string{events.HeaderCorrelationID: "c-1"},
		})
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	// The state the relay leaves after the broker refused it for good.
	if _, err := pool.Exec(context.Background(),
		`UPDATE outbox_event SET status = 'DEAD', attempts = 12, refusals = 12, last_error = 'kafka: Message Size Too Large' WHERE id = $1`, id); err != nil {
		t.Fatalf("make the event DEAD: %v", err)
	}

	t.Run("list-dead shows it", func(t *testing.T) {
		code, stdout, _, err := runCLI(t, env, "outbox", "list-dead")
		if code != 0 {
			t.Fatalf("list-dead: exit %d: %v", code, err)
		}
		row := regexp.MustCompile(`(?m)^` + id.String() + `\s+` + regexp.QuoteMeta(topic) + `\s+CC-001\s+TransferenciaLiquidada\s+12\s+12\s+\S+\s+kafka: Message Size Too Large$`)
		if !row.MatchString(stdout) || !strings.Contains(stdout, "1 dead event(s)") {
			t.Errorf("list-dead output does not show the event as a row:\n%s", stdout)
		}
	})

	t.Run("requeue by id", func(t *testing.T) {
		code, stdout, _, err := runCLI(t, env, "outbox", "requeue", "--id", id.String(),
			"--operator", "alice", "--reason", "OPS-7")
		if code != 0 {
			t.Fatalf("requeue: exit %d: %v", code, err)
		}
		if !strings.Contains(stdout, "1 event(s) requeued") || !strings.Contains(stdout, `operator="alice" action=requeue`) {
			t.Errorf("requeue output: %q", stdout)
		}
		var status string
		var attempts int
		if err := pool.QueryRow(context.Background(), `SELECT status, attempts FROM outbox_event WHERE id = $1`, id).Scan(&status, &attempts); err != nil {
			t.Fatal(err)
		}
		if status != "PENDING" || attempts != 0 {
			t.Errorf("after requeue: status %s, attempts %d; want PENDING, 0", status, attempts)
		}
		_, stdout, _, _ = runCLI(t, env, "outbox", "list-dead")
		if !strings.Contains(stdout, "0 dead event(s)") {
			t.Errorf("list-dead after requeue:\n%s", stdout)
		}
	})

	t.Run("a relay publishes it", func(t *testing.T) {
		brokers := kafkatest.Brokers(t)
		w := kafkatest.NewWriter(t, broker.Config{Brokers: brokers})
		defer w.Close()
		relay := outbox.NewRelay(ob, w, outbox.RelayConfig{PollInterval: 100 * time.Millisecond}, slog.New(slog.DiscardHandler), nil)
		defer background.Go(t, "relay", relay.Run).Stop(t)

		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 250 * time.Millisecond})
		defer r.Close()
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		defer rcancel()
		m, err := r.ReadMessage(rctx)
		if err != nil {
			t.Fatalf("no record on %s after requeue: %v", topic, err)
		}
		got := map[string]string{"key": string(m.Key)}
		for _, h := range m.Headers {
			got[h.Key] = string(h.Value)
		}
		want := map[string]string{
			"key": "CC-001", events.HeaderEventID: id.String(), events.HeaderEventType: events.TypeSettled,
			events.HeaderCorrelationID: "c-1",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("record key and headers mismatch (-want +got):\n%s", diff)
		}
		var gotPayload, wantPayload any
		if err := json.Unmarshal(m.Value, &gotPayload); err != nil {
			t.Fatalf("record value %s: %v", m.Value, err)
		}
		_ = json.Unmarshal([]byte(payload), &wantPayload)
		if diff := cmp.Diff(wantPayload, gotPayload); diff != "" {
			t.Errorf("payload mismatch (-want +got):\n%s", diff)
		}
		poll.Until(t, 30*time.Second, "the requeued event marked PUBLISHED after it reached Kafka", func() (bool, string) {
			var status string
			if err := pool.QueryRow(context.Background(), `SELECT status FROM outbox_event WHERE id = $1`, id).Scan(&status); err != nil {
				t.Fatal(err)
			}
			return status == "PUBLISHED", "status " + status
		})
	})

	t.Run("requeue with nothing DEAD fails", func(t *testing.T) {
		code, stdout, _, err := runCLI(t, map[string]string{"DATABASE_URL": dsn, "USER": "bob"}, "outbox", "requeue", "--id", id.String())
		if code != 1 || err == nil || !strings.Contains(err.Error(), "no DEAD event matched") {
			t.Errorf("exit %d, err %v; want exit 1, no DEAD event matched (stdout %q)", code, err, stdout)
		}
	})

	t.Run("discard by id, audited", func(t *testing.T) {
		if _, err := pool.Exec(context.Background(), `UPDATE outbox_event SET status = 'DEAD' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		code, stdout, _, err := runCLI(t, map[string]string{"DATABASE_URL": dsn, "USER": "carol"}, "outbox", "discard", "--id", id.String(), "--reason", "duplicate")
		if code != 0 || !strings.Contains(stdout, `operator="carol" action=discard`) {
			t.Fatalf("discard: exit %d, %v, stdout %q", code, err, stdout)
		}
		var got []string
		rows, err := pool.Query(context.Background(), `SELECT operator || ' ' || action || ' ' || reason FROM outbox_audit ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		got, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"alice requeue OPS-7", "carol discard duplicate"}, got); diff != "" {
			t.Errorf("outbox_audit (-want +got):\n%s", diff)
		}
		var status string
		if err := pool.QueryRow(context.Background(), `SELECT status FROM outbox_event WHERE id = $1`, id).Scan(&status); err != nil || status != "DISCARDED" {
			t.Errorf("status after discard = %q, %v; want DISCARDED", status, err)
		}
	})
}

// TestTopicsCreateTwice creates the contract topics on the real test broker,
// then again: the second run reports every topic as existing. The names are
// the real contract names, so another test (or an earlier run) may have
// created some already; the first run only has to account for all of them.
func TestTopicsCreateTwice(t *testing.T) {
	t.Parallel()
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	specs := broker.SuiteTopics(events.DefaultTopics, 1)
	line := regexp.MustCompile(`^(created|exists)\s+(\S+) \(partitions (\d+), replication factor 1, min.insync.replicas 1\)$`)

	states := func(stdout string) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("unexpected output line %q", l)
				continue
			}
			out[m[2]] = m[1]
		}
		return out
	}
	code, stdout, _, err := runCLI(t, nil, "topics", "create", "--brokers", brokers)
	if code != 0 {
		t.Fatalf("first run: exit %d: %v\n%s", code, err, stdout)
	}
	first := states(stdout)
	code, stdout, _, err = runCLI(t, map[string]string{"KAFKA_BROKERS": brokers}, "topics", "create")
	if code != 0 {
		t.Fatalf("second run: exit %d: %v\n%s", code, err, stdout)
	}
	second := states(stdout)

	want := map[string]string{}
	for _, s := range specs {
		want[s.Name] = "exists"
		if st, ok := first[s.Name]; !ok || (st != "created" && st != "exists") {
			t.Errorf("first run: topic %s reported %q", s.Name, st)
		}
	}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("second run mismatch (-want +got):\n%s", diff)
	}
	// CONTRACTS.md sections 3, 9 and 10: 11 main topics, the DLTs of
	// solicitada, analisada, the two command topics and
	// estorno.solicitado, and for liquidada, rejeitada, reservada,
	// cancelada, estorno.liquidado and estorno.rejeitado 3 retry topics
	// and a DLT.
	if len(want) != 11+5+6*4 {
		t.Errorf("%d contract topics, want 40 (CONTRACTS.md sections 3, 9 and 10)", len(want))
	}

	// The topics are really there. A broker applies the controller's
	// metadata a moment after CreateTopics answers, so its first metadata
	// answer for a topic created just now may still say unknown.
	c := &kafka.Client{Addr: kafka.TCP(kafkatest.Brokers(t)...), Timeout: 30 * time.Second}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	poll.Until(t, 30*time.Second, "every contract topic in the broker's metadata", func() (bool, string) {
		md, err := c.Metadata(context.Background(), &kafka.MetadataRequest{Topics: names})
		if err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, tp := range md.Topics {
			if tp.Error != nil || len(tp.Partitions) == 0 {
				missing = append(missing, fmt.Sprintf("%s: %v, %d partitions", tp.Name, tp.Error, len(tp.Partitions)))
			}
		}
		return len(md.Topics) == len(names) && len(missing) == 0, strings.Join(missing, "; ")
	})
}

func TestProbe(t *testing.T) {
	t.Parallel()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer ok.Close()
	unready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer unready.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()

	tests := []struct {
		name     string
		url      string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"200 is healthy", ok.URL + "/readyz", 0, "ok\n", ""},
		{"503 is not", unready.URL + "/readyz", 1, "", "answered 503"},
		{"nothing listening", goneURL + "/readyz", 1, "", "connect"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, _, err := runCLI(t, nil, "probe", tc.url)
			if code != tc.wantCode || stdout != tc.wantOut {
				t.Errorf("exit %d, stdout %q (err %v); want exit %d, stdout %q", code, stdout, err, tc.wantCode, tc.wantOut)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestMigrate applies a service's migrations to an empty database; a second
// run finds nothing to do.
func TestMigrate(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	file := filepath.Join(t.TempDir(), "database-url")
	if err := os.WriteFile(file, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		code, stdout, _, err := runCLI(t, nil, "migrate", "--service", "ledger", "--database-url-file", file)
		if code != 0 || stdout != "migrations of ledger applied\n" {
			t.Fatalf("migrate: exit %d, stdout %q, err %v", code, stdout, err)
		}
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_name IN ('outbox_event', 'inbox_event')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d of the platform tables exist after migrate, want 2", n)
	}
}

// A bad Kafka security setting stops `topics create` (and `dlt`) before any
// connection, listing every problem by variable name, never a value.
func TestKafkaSecurityMistakes(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"KAFKA_BROKERS":        "127.0.0.1:1",
		"KAFKA_SASL_MECHANISM": "OAUTHBEARER", "KAFKA_SASL_USERNAME": "admin", "KAFKA_SASL_PASSWORD": "hunter2-hunter2",
		"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": "/nonexistent/ca.pem",
	}
	for _, args := range [][]string{{"topics", "create", "--acls"}, {"dlt", "list", "--topic", "t"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, _, err := runCLI(t, env, args...)
			if code != 1 || err == nil {
				t.Fatalf("exit code %d (%v), want 1", code, err)
			}
			for _, want := range []string{
				"KAFKA_SASL_MECHANISM: unsupported mechanism",
				"KAFKA_TLS_CA_FILE: cannot read the file: no such file or directory",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			for _, value := range []string{"OAUTHBEARER", "hunter2", "/nonexistent"} {
				if strings.Contains(err.Error(), value) {
					t.Errorf("the error shows the value %q: %v", value, err)
				}
			}
		})
	}
}
