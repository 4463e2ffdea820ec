package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// openBase opens a transfers service on a fresh database and the test
// broker, listening on a free port.
func openBase(tb testing.TB, issuer *authtest.TestIssuer, drain time.Duration) *service {
	tb.Helper()
	cfg := platform.Config{
		Service:        "transfers",
		HTTPAddr:       "127.0.0.1:0",
		DatabaseURL:    pgtest.NewDSN(tb, migrations.ForService("transfers")...),
		DBMaxConns:     4,
		MigrateOnStart: true,
		Kafka:          broker.Config{Brokers: kafkatest.Brokers(tb)},
		Relay: outbox.RelayConfig{BatchSize: 10, Workers: 1, PollInterval: 50 * time.Millisecond,
			Lease: 30 * time.Second, SendTimeout: 5 * time.Second, MaxAttempts: 5,
			BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second, Retention: time.Hour},
		Auth:          issuer.Config(),
		ShutdownDrain: drain,
	}
	return mustOpenService(tb, cfg, slog.New(slog.DiscardHandler))
}

// running is a service under run.
type running struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func runBase(tb testing.TB, b *service, tasks ...platform.Task) *running {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- b.run(ctx, func(a net.Addr) { addrc <- a }, tasks...) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				tb.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			tb.Error("Run did not return within a minute of the cancel")
		}
	})
	select {
	case a := <-addrc:
		r.addr = "http://" + a.String()
	case err := <-r.done:
		tb.Fatalf("Run: %v", err)
	}
	return r
}

type answer struct {
	Status int
	Body   string
}

func get(client *http.Client, url string) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{}, err
	}
	res, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return answer{res.StatusCode, string(body)}, err
}

// On SIGTERM (ctx cancelled), /readyz turns unready at once while the
// listener keeps serving for the drain window: a request started before
// the cancel completes with its normal answer, and a new request during
// the window is still served. Only then does the listener close.
func TestStopDrainsHTTPWhileReadyzIsUnready(t *testing.T) {
	t.Parallel()
	const drain = 3 * time.Second
	issuer := authtest.New(t)
	b := openBase(t, issuer, drain)
	entered, release := make(chan struct{}), make(chan struct{})
	auth.Mount(b.router, b.log, []auth.Route{
		{Method: http.MethodGet, Pattern: "/slow", Scope: "teste", Handler: func(w http.ResponseWriter, _ *http.Request) {
			close(entered)
			<-release
			httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "slow done"})
		}},
		{Method: http.MethodGet, Pattern: "/fast", Scope: "teste", Handler: func(w http.ResponseWriter, _ *http.Request) {
			httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "fast done"})
		}},
	})
	r := runBase(t, b)
	client := &http.Client{Transport: &authtest.Transport{Bearer: issuer.Bearer(t, "c1", "teste")}}
	poll.Until(t, 30*time.Second, "/readyz 200 before the stop", func() (bool, string) {
		a, err := get(client, r.addr+"/readyz")
		return err == nil && a.Status == http.StatusOK, a.Body
	})

	slow := make(chan answer, 1)
	go func() {
		a, err := get(client, r.addr+"/slow")
		if err != nil {
			a.Body = err.Error()
		}
		slow <- a
	}()
	<-entered
	r.cancel()
	stopped := time.Now()

	var p httpapi.Problem
	poll.Until(t, time.Second, "/readyz 503 right after the cancel", func() (bool, string) {
		a, err := get(client, r.addr+"/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = json.Unmarshal([]byte(a.Body), &p)
		return a.Status == http.StatusServiceUnavailable, a.Body
	})
	if want := "not ready: " + platform.CheckShuttingDown; p.Detail != want {
		t.Errorf("/readyz detail = %q, want %q", p.Detail, want)
	}
	fast, err := get(client, r.addr+"/fast")
	if err != nil {
		t.Fatalf("a new request during the drain window: %v", err)
	}
	if since := time.Since(stopped); since >= drain {
		t.Fatalf("the checks took %v, longer than the drain window: the test proves nothing", since)
	}
	close(release)
	want := []answer{
		{http.StatusOK, `{"status":"fast done"}` + "\n"},
		{http.StatusOK, `{"status":"slow done"}` + "\n"},
	}
	if diff := cmp.Diff(want, []answer{fast, <-slow}); diff != "" {
		t.Errorf("answers during the drain (-want +got):\n%s", diff)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		if since := time.Since(stopped); since < drain {
			t.Errorf("Run returned %v after the cancel, before the drain window (%v) ended", since, drain)
		}
	case <-time.After(drain + 30*time.Second):
		t.Fatal("Run did not return after the drain window")
	}
	r.done <- nil // for the cleanup
	if _, err := get(client, r.addr+"/fast"); err == nil {
		t.Error("the listener still accepts after Run returned")
	}
}

// The stop order: the consumers finish the record in hand and commit it,
// then the relay stops (it still publishes what is enqueued after the
// consumers stopped), then the pool closes. A member started afterwards in
// the same group does not see the record again.
func TestStopOrderConsumersThenRelayThenPool(t *testing.T) {
	t.Parallel()
	issuer := authtest.New(t)
	b := openBase(t, issuer, 0)
	topic := kafkatest.Topic(t, "platform-stop", 1)
	published := kafkatest.Topic(t, "platform-stop-relay", 1)
	group := kafkatest.Group(t, "platform-stop")
	prod := kafkatest.NewProducer(t)

	handling, finish := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var seen []string
	handler := func(_ context.Context, ms []broker.Record) error {
		for _, m := range ms {
			once.Do(func() {
				close(handling)
				<-finish // the record in hand when the stop comes
			})
			mu.Lock()
			seen = append(seen, string(m.Value))
			mu.Unlock()
		}
		return nil
	}
	// afterConsumers is what the service looks like once its consumers
	// have returned: the pool is open and the relay still publishes.
	var afterConsumers struct {
		pingErr   error
		published bool
		state     string
	}
	consumers := func(ctx context.Context) error {
		err := consumer.Run(ctx, b.consumer(group, []string{topic}, handler, consumer.BlockingRetries))
		bg := context.Background()
		afterConsumers.pingErr = b.db.Ping(bg)
		id, qerr := enqueue(bg, b, published)
		if qerr != nil {
			afterConsumers.state = qerr.Error()
			return err
		}
		// Not poll.Until: this runs on the service's goroutine; the test
		// reads the outcome once Run returns.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); <-time.After(poll.Interval) {
			qerr = b.db.Pool.QueryRow(bg, `SELECT status FROM outbox_event WHERE id = $1`, id).Scan(&afterConsumers.state)
			if qerr != nil {
				afterConsumers.state = qerr.Error()
			}
			if afterConsumers.published = afterConsumers.state == "PUBLISHED"; afterConsumers.published {
				break
			}
		}
		return err
	}
	r := runBase(t, b, consumers)
	prod.Plain(kafka.Message{Topic: topic, Key: []byte("k"), Value: []byte("r1")})
	select {
	case <-handling:
	case <-time.After(60 * time.Second):
		t.Fatal("r1 not handled within a minute")
	}
	r.cancel()
	close(finish)
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("Run did not return")
	}
	r.done <- nil
	if afterConsumers.pingErr != nil {
		t.Errorf("the pool was closed before the consumers stopped: %v", afterConsumers.pingErr)
	}
	if !afterConsumers.published {
		t.Errorf("an event enqueued after the consumers stopped was not published (status %s): the relay stopped with them", afterConsumers.state)
	}
	if err := b.db.Ping(context.Background()); err == nil {
		t.Error("the pool is still open after Run returned")
	}

	// A new member of the group starts after r1's committed offset.
	prod.Plain(kafka.Message{Topic: topic, Key: []byte("k"), Value: []byte("r2")})
	mu.Lock()
	seen = nil
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(ctx, consumer.Config{Broker: broker.Config{Brokers: kafkatest.Brokers(t)},
			Group: group, Topics: []string{topic}, Handler: handler, Logger: slog.New(slog.DiscardHandler)})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer.Run: %v", err)
		}
	}()
	poll.Until(t, 60*time.Second, "r2 handled by the restarted member", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0, ""
	})
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"r2"}, seen); diff != "" {
		t.Errorf("records the restarted member handled (-want +got):\n%s", diff)
	}
}

// enqueue writes one event for topic in the outbox and returns its id.
func enqueue(ctx context.Context, b *service, topic string) (string, error) {
	var id string
	err := b.db.InTx(ctx, func(tx pgx.Tx) error {
		if err := b.outbox.Enqueue(ctx, tx, events.Message{AggregateType: "test", AggregateID: "a1",
			Topic: topic, Key: "a1", Type: "teste", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT id::text FROM outbox_event ORDER BY seq DESC LIMIT 1`).Scan(&id)
	})
	if id == "" && err == nil {
		err = errors.New("no outbox row")
	}
	return id, err
}

// SHUTDOWN_DRAIN is validated at start: a negative, oversized or
// unparsable drain is refused with the variable's name.
func TestShutdownDrainFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", platform.DefaultShutdownDrain, false},
		{"0s", 0, false},
		{"10s", 10 * time.Second, false},
		{"-1s", 0, true},
		{"2m", 0, true},
		{"soon", 0, true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			vars := authtest.New(t).Env()
			vars["DATABASE_URL"] = "postgres://localhost/x"
			vars["SHUTDOWN_DRAIN"] = tc.value
			cfg := platform.DefaultConfig("transfers", ":0")
			err := envconfig.Join(envconfig.Parse(func(k string) string { return vars[k] }, &cfg, platform.ParseOptions()...), cfg.Complete())
			if (err != nil) != tc.wantErr {
				t.Fatalf("SHUTDOWN_DRAIN=%q: err = %v, want error %v", tc.value, err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "SHUTDOWN_DRAIN") {
					t.Errorf("the error does not name SHUTDOWN_DRAIN: %v", err)
				}
				return
			}
			if cfg.ShutdownDrain != tc.want {
				t.Errorf("ShutdownDrain = %v, want %v", cfg.ShutdownDrain, tc.want)
			}
		})
	}
}
