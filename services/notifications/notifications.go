// Package notifications is the notifications service: it consumes the
// transfer results (liquidada, rejeitada) in consumer group "notificacoes"
// and tells each customer through a channel, a signed webhook or the log,
// once per result event. Failed sends go through retry topics (1 s, 2 s,
// 4 s) and then the DLT, without holding up the main topics; see
// CONTRACTS.md section 7.
package notifications

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/notifications/internal/channels"
	"github.com/paysuite/payments/services/notifications/internal/kafka"
	"github.com/paysuite/payments/services/notifications/internal/notify"
	"github.com/paysuite/payments/services/notifications/internal/postgres"
)

// Service is the service's name: its logs and its migration set.
const Service = "notifications"

// DefaultGroup is the consumer group of CONTRACTS.md section 3.
const DefaultGroup = "notificacoes"

// Channels.
const (
	ChannelLog     = "log"
	ChannelWebhook = "webhook"
)

// minSecretLen is the shortest webhook secret accepted.
const minSecretLen = 16

// Secret is a value never printed: it formats and logs as "[REDACTED]".
type Secret string

// String implements fmt.Stringer.
func (Secret) String() string { return "[REDACTED]" }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return "[REDACTED]" }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue("[REDACTED]") }

// Config is the service's configuration.
type Config struct {
	platform.Config
	// Topics names the topics; the service reads Settled and Rejected, their
	// retry topics, and writes their DLTs.
	Topics events.Topics
	// Group is the consumer group (DefaultGroup; tests use unique ones).
	Group string
	// Channel is ChannelLog or ChannelWebhook (NOTIFY_CHANNEL).
	Channel string
	// Webhook configures ChannelWebhook.
	Webhook WebhookConfig
}

// WebhookConfig configures the webhook channel.
type WebhookConfig struct {
	// DefaultURL receives the notifications of accounts without their own
	// URL (WEBHOOK_DEFAULT_URL).
	DefaultURL string
	// URLs maps source accounts to their URLs (WEBHOOK_URLS).
	URLs map[string]string
	// Secret signs the requests (WEBHOOK_SECRET).
	Secret Secret
	// Timeout bounds one request (WEBHOOK_TIMEOUT).
	Timeout time.Duration
}

// ConfigFromEnv reads the configuration from the environment:
//
//	HTTP_ADDR            listen address                         (:8083)
//	DATABASE_URL         the service's PostgreSQL database       (required)
//	DATABASE_MAX_CONNS   pool size                               (20)
//	KAFKA_BROKERS        comma-separated brokers                 (localhost:9092)
//	MIGRATE_ON_START     apply migrations at start               (true)
//	NOTIFY_CHANNEL       log | webhook                           (log)
//	WEBHOOK_DEFAULT_URL  URL for accounts without their own      ("")
//	WEBHOOK_URLS         account=url,account=url,...             ("")
//	WEBHOOK_SECRET       HMAC-SHA256 key, >= 16 characters       (required for webhook; never logged)
//	WEBHOOK_TIMEOUT      timeout of one request                  (5s)
//
// plus the OUTBOX_* and KAFKA_MAX_MESSAGE_BYTES variables every service
// reads (platform.ConfigFromEnv). With NOTIFY_CHANNEL=webhook, at least one
// of WEBHOOK_DEFAULT_URL and WEBHOOK_URLS is required.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	env := platform.NewEnv(getenv)
	cfg := Config{
		Config:  platform.ConfigFromEnv(env, Service, ":8083"),
		Topics:  events.DefaultTopics,
		Group:   DefaultGroup,
		Channel: env.String("NOTIFY_CHANNEL", ChannelLog),
		Webhook: WebhookConfig{
			DefaultURL: env.String("WEBHOOK_DEFAULT_URL", ""),
			Secret:     Secret(env.String("WEBHOOK_SECRET", "")),
			Timeout:    env.Duration("WEBHOOK_TIMEOUT", 5*time.Second),
		},
	}
	urls, err := ParseURLs(env.String("WEBHOOK_URLS", ""))
	env.Check(err)
	cfg.Webhook.URLs = urls
	env.Check(cfg.Validate())
	if err := env.Err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ParseURLs reads "account=url,account=url" (WEBHOOK_URLS).
func ParseURLs(s string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		account, u, ok := strings.Cut(item, "=")
		account, u = strings.TrimSpace(account), strings.TrimSpace(u)
		if !ok || account == "" || u == "" {
			return nil, fmt.Errorf("WEBHOOK_URLS: %q is not account=url", item)
		}
		if _, dup := out[account]; dup {
			return nil, fmt.Errorf("WEBHOOK_URLS: account %q listed twice", account)
		}
		out[account] = u
	}
	return out, nil
}

// Validate checks the service-specific settings.
func (c Config) Validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("consumer group is empty"))
	}
	if c.Topics.Settled == "" || c.Topics.Rejected == "" {
		errs = append(errs, errors.New("settled and rejected topics are required"))
	}
	switch c.Channel {
	case ChannelLog:
	case ChannelWebhook:
		w := c.Webhook
		if len(w.Secret) < minSecretLen {
			errs = append(errs, fmt.Errorf("WEBHOOK_SECRET must have at least %d characters", minSecretLen))
		}
		if w.DefaultURL == "" && len(w.URLs) == 0 {
			errs = append(errs, errors.New("NOTIFY_CHANNEL=webhook needs WEBHOOK_DEFAULT_URL or WEBHOOK_URLS"))
		}
		if w.DefaultURL != "" {
			errs = append(errs, checkURL("WEBHOOK_DEFAULT_URL", w.DefaultURL))
		}
		accounts := make([]string, 0, len(w.URLs))
		for a := range w.URLs {
			accounts = append(accounts, a)
		}
		sort.Strings(accounts)
		for _, a := range accounts {
			errs = append(errs, checkURL("WEBHOOK_URLS["+a+"]", w.URLs[a]))
		}
		if w.Timeout <= 0 {
			errs = append(errs, errors.New("WEBHOOK_TIMEOUT must be positive"))
		}
	default:
		errs = append(errs, fmt.Errorf("NOTIFY_CHANNEL: %q is neither log nor webhook", c.Channel))
	}
	return errors.Join(errs...)
}

func checkURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an absolute http(s) URL", name, raw)
	}
	return nil
}

// Run runs the service until ctx is cancelled: HTTP (health, metrics) and
// the consumers of the result topics and their retry topics. listening, if
// not nil, receives the HTTP address once bound.
func Run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr)) error {
	cfg.Service = Service
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	base, err := platform.Open(ctx, cfg.Config, log)
	if err != nil {
		return err
	}
	var sender notify.Sender
	switch cfg.Channel {
	case ChannelWebhook:
		sender = channels.NewWebhook(channels.WebhookConfig{
			DefaultURL: cfg.Webhook.DefaultURL,
			URLs:       cfg.Webhook.URLs,
			Secret:     []byte(cfg.Webhook.Secret),
			Timeout:    cfg.Webhook.Timeout,
		})
	default:
		sender = channels.NewLog(base.Log)
	}
	svc := notify.NewService(postgres.New(base.DB), sender, notify.NewMetrics(base.Registry), base.Log)
	handler := kafka.NewHandler(svc, cfg.Topics)
	consume := base.Consumer(cfg.Group, []string{cfg.Topics.Settled, cfg.Topics.Rejected},
		handler.Handle, consumer.NotificationPolicy)
	base.Log.InfoContext(ctx, "notifications starting", "channel", cfg.Channel, "group", cfg.Group,
		"accounts_with_url", len(cfg.Webhook.URLs), "default_url", cfg.Webhook.DefaultURL != "")
	return base.Run(ctx, listening, func(ctx context.Context) error { return consumer.Run(ctx, consume) })
}
