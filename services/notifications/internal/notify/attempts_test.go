package notify_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/migrations"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/notifications/internal/notify"
	"github.com/paysuite/payments/services/notifications/internal/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
)

// attemptRow is one notification_attempt row, without its time.
type attemptRow struct {
	Attempt               int
	Channel, Topic, Error string
	Outcome               string
	Transfer              uuid.UUID
}

func attemptRows(tb testing.TB, pool *pgxpool.Pool, eventID uuid.UUID) []attemptRow {
	tb.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT attempt, channel, topic, COALESCE(error, ''), outcome, transfer_id
  FROM notification_attempt WHERE event_id = $1 ORDER BY attempt`, eventID)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []attemptRow
	for rows.Next() {
		var r attemptRow
		if err := rows.Scan(&r.Attempt, &r.Channel, &r.Topic, &r.Error, &r.Outcome, &r.Transfer); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestAttemptsRecordTheirTopic: an event whose send fails in a batch read
// from the main topic and then succeeds one by one from a retry topic has
// two attempt rows, each with its topic and outcome; a duplicate delivery
// adds none; an event notified at once by the batch has one.
func TestAttemptsRecordTheirTopic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t, migrations.ForService("notifications")...)
	store := postgres.New(pg.Wrap(pool))
	first, second := notification(), notification()
	first.Topic, second.Topic = "main", "main"
	sender := &countingSender{sent: map[uuid.UUID]int{}, answers: map[uuid.UUID][]error{
		second.EventID: {errRefused},
	}}
	svc := notify.NewService(store, sender, nil, slog.New(slog.DiscardHandler))
	if err := svc.NotifyBatch(ctx, []notify.Notification{first, second}); err == nil {
		t.Fatal("NotifyBatch with a refused send returned nil")
	}
	retried := second
	retried.Topic = "main-retry-1000"
	if err := svc.Notify(ctx, retried); err != nil {
		t.Fatal(err)
	}
	if err := svc.Notify(ctx, retried); err != nil { // a duplicate: nothing sent, nothing recorded
		t.Fatal(err)
	}

	want := []attemptRow{
		{Attempt: 1, Channel: "fake", Topic: "main", Outcome: "FAILED", Error: "refused", Transfer: second.TransferID},
		{Attempt: 2, Channel: "fake", Topic: "main-retry-1000", Outcome: "DELIVERED", Transfer: second.TransferID},
	}
	if diff := cmp.Diff(want, attemptRows(t, pool, second.EventID)); diff != "" {
		t.Errorf("attempts of the retried event (-want +got):\n%s", diff)
	}
	want = []attemptRow{{Attempt: 1, Channel: "fake", Topic: "main", Outcome: "DELIVERED", Transfer: first.TransferID}}
	if diff := cmp.Diff(want, attemptRows(t, pool, first.EventID)); diff != "" {
		t.Errorf("attempts of the event the batch delivered (-want +got):\n%s", diff)
	}
}

// errText is an error with the given text.
type errText string

func (e errText) Error() string { return string(e) }

// TestAttemptErrorSanitized: a receiver's error text with control
// characters, invalid UTF-8 and more than 1000 bytes is stored valid,
// without control characters, cut on a character boundary.
func TestAttemptErrorSanitized(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t, migrations.ForService("notifications")...)
	store := postgres.New(pg.Wrap(pool))
	n := notification()
	n.Topic = "main"
	msg := "HTTP 500:\n<b>\x00bad\xff</b>" + strings.Repeat("é", 600)
	sender := &countingSender{sent: map[uuid.UUID]int{}, answers: map[uuid.UUID][]error{n.EventID: {errText(msg)}}}
	svc := notify.NewService(store, sender, nil, slog.New(slog.DiscardHandler))
	if err := svc.Notify(ctx, n); err == nil {
		t.Fatal("Notify with a refused send returned nil")
	}
	rows := attemptRows(t, pool, n.EventID)
	if len(rows) != 1 {
		t.Fatalf("%d attempt rows, want 1", len(rows))
	}
	got := rows[0].Error
	if !utf8.ValidString(got) || len(got) > 1000 || strings.ContainsAny(got, "\n\x00") || !strings.HasPrefix(got, "HTTP 500: <b> bad\uFFFD</b>é") {
		t.Errorf("stored error %q (%d bytes): want valid UTF-8, no control characters, at most 1000 bytes", got, len(got))
	}
	e, err := store.Get(ctx, n.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if e.LastError != got {
		t.Errorf("log entry error %q, attempt error %q: want the same", e.LastError, got)
	}
}
