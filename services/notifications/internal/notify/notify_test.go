package notify_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/outage"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/notifications/internal/channels"
	"github.com/paysuite/payments/services/notifications/internal/notify"
	"github.com/paysuite/payments/services/notifications/internal/postgres"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

func newStore(tb testing.TB) *postgres.Store {
	tb.Helper()
	return postgres.New(pg.Wrap(pgtest.NewPool(tb, migrations.ForService("notifications")...)))
}

func notification() notify.Notification {
	return notify.Notification{
		EventID: uuid.New(), EventType: "TransferenciaLiquidada", TransferID: uuid.New(),
		Status: "LIQUIDADA", OccurredAt: time.Now().UTC(), Account: "CC-001",
	}
}

// fakeSender is a Sender whose answers are scripted per call.
type fakeSender struct {
	mu      sync.Mutex
	calls   int
	answers []error
}

func (*fakeSender) Channel() string { return "fake" }

func (f *fakeSender) Send(context.Context, notify.Notification) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.answers) == 0 {
		return nil
	}
	err := f.answers[0]
	f.answers = f.answers[1:]
	return err
}

var errRefused = errors.New("refused")

// Each delivery of an event: what is sent, what is returned and what the log
// records.
func TestNotifyOutcomes(t *testing.T) {
	t.Parallel()
	type step struct {
		answer    error // the sender's answer, if it is called
		wantErr   error // nil: Notify returns nil
		wantSent  bool
		wantEntry notify.Entry // EventID, TransferID, DeliveredAt ignored
	}
	tests := []struct {
		name    string
		steps   []step
		outcome map[string]float64
	}{
		{name: "delivered, then a redelivery sends nothing", steps: []step{
			{wantSent: true, wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusDelivered, Attempts: 1}},
			{wantSent: false, wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusDelivered, Attempts: 1}},
		}, outcome: map[string]float64{notify.OutcomeDelivered: 1, notify.OutcomeDuplicate: 1}},
		{name: "failed twice, then delivered", steps: []step{
			{answer: errRefused, wantErr: errRefused, wantSent: true,
				wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusFailed, Attempts: 1, LastError: "refused"}},
			{answer: errRefused, wantErr: errRefused, wantSent: true,
				wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusFailed, Attempts: 2, LastError: "refused"}},
			{wantSent: true, wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusDelivered, Attempts: 3}},
		}, outcome: map[string]float64{notify.OutcomeFailed: 2, notify.OutcomeDelivered: 1}},
		{name: "timeout is retried", steps: []step{
			{answer: notify.ErrOutcomeUnknown, wantErr: notify.ErrOutcomeUnknown, wantSent: true,
				wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusFailed, Attempts: 1, LastError: notify.ErrOutcomeUnknown.Error()}},
			{wantSent: true, wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusDelivered, Attempts: 2}},
		}, outcome: map[string]float64{notify.OutcomeTimeout: 1, notify.OutcomeDelivered: 1}},
		{name: "no destination is not an error and not final", steps: []step{
			{answer: notify.ErrNoDestination, wantSent: true,
				wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusNoDestination, Attempts: 1, LastError: notify.ErrNoDestination.Error()}},
			{wantSent: true, wantEntry: notify.Entry{Channel: "fake", Status: notify.StatusDelivered, Attempts: 2}},
		}, outcome: map[string]float64{notify.OutcomeNoDestination: 1, notify.OutcomeDelivered: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			sender := &fakeSender{}
			metrics := notify.NewMetrics(nil)
			svc := notify.NewService(store, sender, metrics, slog.New(slog.DiscardHandler))
			n := notification()
			for i, s := range tt.steps {
				before := sender.calls
				sender.answers = []error{s.answer}
				err := svc.Notify(context.Background(), n)
				if !errors.Is(err, s.wantErr) || (s.wantErr == nil) != (err == nil) {
					t.Fatalf("step %d: Notify() = %v, want %v", i, err, s.wantErr)
				}
				if sent := sender.calls > before; sent != s.wantSent {
					t.Errorf("step %d: sent = %v, want %v", i, sent, s.wantSent)
				}
				got, err := store.Get(context.Background(), n.EventID)
				if err != nil {
					t.Fatal(err)
				}
				if got.EventID != n.EventID || got.TransferID != n.TransferID {
					t.Errorf("step %d: entry ids = %s/%s, want %s/%s", i, got.EventID, got.TransferID, n.EventID, n.TransferID)
				}
				if (s.wantEntry.Status == notify.StatusDelivered) == got.DeliveredAt.IsZero() {
					t.Errorf("step %d: delivered_at = %v with status %s", i, got.DeliveredAt, got.Status)
				}
				if diff := cmp.Diff(s.wantEntry, got, cmpopts.IgnoreFields(notify.Entry{}, "EventID", "TransferID", "DeliveredAt")); diff != "" {
					t.Errorf("step %d: entry mismatch (-want +got):\n%s", i, diff)
				}
			}
			for outcome, want := range tt.outcome {
				var m dto.Metric
				if err := metrics.Sends.WithLabelValues("fake", outcome).Write(&m); err != nil {
					t.Fatal(err)
				}
				if got := m.GetCounter().GetValue(); got != want {
					t.Errorf("sends{outcome=%s} = %v, want %v", outcome, got, want)
				}
			}
		})
	}
}

func TestGetUnknown(t *testing.T) {
	t.Parallel()
	if _, err := newStore(t).Get(context.Background(), uuid.New()); !errors.Is(err, notify.ErrNotFound) {
		t.Fatalf("Get(unknown) = %v, want ErrNotFound", err)
	}
}

// Concurrent deliveries of one event (the main topic and a replay, say)
// send once: the others wait on the event's claim (an advisory lock) while
// the first one sends, and then find it delivered. The send itself runs in
// no transaction and holds no row lock. That holds for a new event (the entry
// is being created) and for one whose earlier attempt failed (the entry
// exists).
func TestConcurrentDeliveriesSendOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		failedBefore bool
		wantAttempts int
	}{
		{name: "new event", wantAttempts: 1},
		{name: "after a failed attempt", failedBefore: true, wantAttempts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const deliveries = 8
			// One connection per delivery, so that they all reach the lock.
			db, err := pg.Open(context.Background(), pgtest.NewDSN(t, migrations.ForService("notifications")...), deliveries+2)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			store := postgres.New(db)
			n := notification()
			if tt.failedBefore {
				failing := notify.NewService(store, &fakeSender{answers: []error{errRefused}}, nil, slog.New(slog.DiscardHandler))
				if err := failing.Notify(context.Background(), n); !errors.Is(err, errRefused) {
					t.Fatalf("first attempt: %v, want %v", err, errRefused)
				}
			}

			var requests atomic.Int32
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				select {
				case <-release:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			defer close(release)
			sender := channels.NewWebhook(channels.WebhookConfig{
				Default: channels.Destination{URL: srv.URL, Secrets: [][]byte{[]byte("0123456789abcdef")}}, Timeout: 30 * time.Second})
			svc := notify.NewService(store, sender, nil, slog.New(slog.DiscardHandler))

			errs := make(chan error, deliveries)
			for range deliveries {
				go func() { errs <- svc.Notify(context.Background(), n) }()
			}
			// One delivery is sending; the others are blocked on its lock.
			poll.Until(t, 30*time.Second, "one send in flight and the other deliveries waiting on the lock", func() (bool, string) {
				var waiting int
				err := db.QueryRow(context.Background(),
					`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
				return err == nil && requests.Load() == 1 && waiting == deliveries-1,
					fmt.Sprintf("%d requests in flight, %d deliveries waiting on a lock, err %v", requests.Load(), waiting, err)
			})
			var inTx int
			if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&inTx); err != nil || inTx != 0 {
				t.Errorf("%d sessions idle in a transaction during the send (err %v), want 0", inTx, err)
			}
			if _, err := db.Exec(context.Background(), `SELECT 1 FROM notification WHERE event_id = $1 FOR UPDATE NOWAIT`, n.EventID); err != nil {
				t.Errorf("the log entry is locked during the send: %v", err)
			}
			release <- struct{}{}
			for range deliveries {
				if err := <-errs; err != nil {
					t.Errorf("Notify() = %v", err)
				}
			}
			if got := requests.Load(); got != 1 {
				t.Errorf("receiver got %d requests, want 1", got)
			}
			e, err := store.Get(context.Background(), n.EventID)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status != notify.StatusDelivered || e.Attempts != tt.wantAttempts {
				t.Errorf("entry = %+v, want DELIVERED after %d attempt(s)", e, tt.wantAttempts)
			}
		})
	}
}

// The consumer loop tells an outage of this service's own database (wait
// it out, never forward the record) from a webhook receiver that is down
// (the retry topics' business) by outage.Unavailable: Notify's errors must
// say which is which.
func TestNotifyErrorsTellOwnOutageFromReceiverDown(t *testing.T) {
	t.Parallel()
	dsn, proxy := netfault.PostgresURL(t, pgtest.NewDSN(t, migrations.ForService("notifications")...))
	db, err := pg.Open(context.Background(), dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close() // nothing listens there any more: connection refused
	receiverDown := channels.NewWebhook(channels.WebhookConfig{Default: channels.Destination{URL: goneURL, Secrets: [][]byte{[]byte("0123456789abcdef")}}, Timeout: 5 * time.Second})
	svc := notify.NewService(postgres.New(db), receiverDown, nil, slog.New(slog.DiscardHandler))

	err = svc.Notify(context.Background(), notification())
	if err == nil || outage.Unavailable(err) {
		t.Errorf("receiver down: Notify = %v, Unavailable = %v; want an error that is not an outage", err, outage.Unavailable(err))
	}
	proxy.Cut()
	err = svc.Notify(context.Background(), notification())
	if err == nil || !outage.Unavailable(err) {
		t.Errorf("own database down: Notify = %v, Unavailable = %v; want an outage", err, outage.Unavailable(err))
	}
}
