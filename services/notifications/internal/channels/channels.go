// Package channels holds the notification channels: a signed HTTP webhook
// and, for development, the log.
package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/notifications/internal/notify"
	"github.com/paysuite/payments/services/notifications/webhook"
)

var (
	_ notify.Sender = (*Webhook)(nil)
	_ notify.Sender = (*Log)(nil)
)

// Log "sends" a notification by logging it: the development channel.
type Log struct {
	log *slog.Logger
}

// NewLog returns the log channel.
func NewLog(log *slog.Logger) *Log { return &Log{log: log} }

// Channel implements notify.Sender.
func (*Log) Channel() string { return "log" }

// Send implements notify.Sender; it always succeeds.
func (l *Log) Send(ctx context.Context, n notify.Notification) error {
	l.log.InfoContext(ctx, "notification", "evento_id", n.EventID, "evento_tipo", n.EventType,
		"transfer_id", n.TransferID, "status", n.Status, "reason", n.Reason, "account", n.Account)
	return nil
}

// Destination is where a webhook goes and the secrets that sign it: one,
// or two while its secret is being rotated (one signature per secret).
type Destination struct {
	URL     string
	Secrets [][]byte
}

// WebhookConfig configures the webhook channel.
type WebhookConfig struct {
	// Default receives the notifications of accounts no other destination
	// lists; an empty URL: those accounts get none.
	Default Destination
	// Accounts maps a source account to its destination.
	Accounts map[string]Destination
	// Timeout bounds a request; past it the outcome is unknown.
	Timeout time.Duration
	// Client replaces the HTTP client (tests); its Timeout is left alone.
	Client *http.Client
	// Now is the clock of the signature timestamp; default time.Now.
	Now func() time.Time
}

// Webhook posts a JSON body, signed with its destination's own secrets, to
// the account's destination. A 2xx answer means
// delivered; anything else, or no answer, is a failure to retry.
type Webhook struct {
	cfg    WebhookConfig
	client *http.Client
	now    func() time.Time
}

// NewWebhook returns the webhook channel.
func NewWebhook(cfg WebhookConfig) *Webhook {
	client := cfg.Client
	if client == nil {
		client = &http.Client{
			Timeout: cfg.Timeout,
			// A redirect is not a delivery, and following one would send
			// the signed body somewhere nobody configured.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Webhook{cfg: cfg, client: client, now: now}
}

// Channel implements notify.Sender.
func (*Webhook) Channel() string { return "webhook" }

// StatusError is a non-2xx answer from a receiver.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("webhook answered HTTP %d", e.Code) }

// Send implements notify.Sender: it returns nil on a 2xx answer,
// notify.ErrNoDestination when neither the account nor the default has a
// URL, an error wrapping notify.ErrOutcomeUnknown on a timeout, a
// *StatusError on another answer, and the transport error otherwise.
func (w *Webhook) Send(ctx context.Context, n notify.Notification) error {
	dest, ok := w.cfg.Accounts[n.Account]
	if !ok {
		dest = w.cfg.Default
	}
	if dest.URL == "" {
		return notify.ErrNoDestination
	}
	body, err := json.Marshal(webhook.Payload{
		EventID:     n.EventID.String(),
		Type:        n.EventType,
		TransferID:  n.TransferID.String(),
		RefundID:    refundID(n),
		Status:      n.Status,
		Reason:      n.Reason,
		AmountCents: n.AmountCents,
		ExpiresAt:   n.ExpiresAt.UTC(),
		OccurredAt:  n.OccurredAt.UTC(),
	})
	if err != nil {
		return fmt.Errorf("encode webhook body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request to %s: invalid URL", envconfig.RedactURL(dest.URL))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "paysuite-notifications/1")
	req.Header.Set(webhook.HeaderEventID, n.EventID.String())
	req.Header.Set(webhook.HeaderSignature, webhook.SignAll(w.now(), body, dest.Secrets...))
	resp, err := w.client.Do(req)
	if err != nil {
		// The client's error quotes the URL; the error is logged, kept in
		// the delivery log and copied into DLT headers, so it names the
		// destination without user info or query.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = envconfig.RedactURL(ue.URL)
		}
		if isTimeout(err) {
			return outcomeUnknown{fmt.Errorf("webhook post: %w", err)}
		}
		return fmt.Errorf("webhook post: %w", err)
	}
	// Drain a little of the body so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Code: resp.StatusCode}
	}
	return nil
}

// outcomeUnknown is a timed-out send: it matches notify.ErrOutcomeUnknown
// and unwraps to the transport error, whose type the DLT headers then name.
type outcomeUnknown struct{ err error }

func (e outcomeUnknown) Error() string        { return "outcome unknown: " + e.err.Error() }
func (e outcomeUnknown) Unwrap() error        { return e.err }
func (e outcomeUnknown) Is(target error) bool { return target == notify.ErrOutcomeUnknown }

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// refundID is the refund id of a refund's result, "" for a transfer's.
func refundID(n notify.Notification) string {
	if n.RefundID == uuid.Nil {
		return ""
	}
	return n.RefundID.String()
}
