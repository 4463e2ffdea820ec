package notifications

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/notifications/internal/channels"
)

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
	// Topics names the topics; the service reads Consumed (Settled,
	// Rejected, Reserved, Cancelled, RefundSettled, RefundRejected), their
	// retry topics, and writes their DLTs.
	Topics events.Topics
	// Group is the consumer group (DefaultGroup; tests use unique ones).
	Group string
	// Channel is ChannelLog or ChannelWebhook.
	Channel string `env:"NOTIFY_CHANNEL" envDefault:"log" help:"log (development) or webhook"`
	// Webhook configures ChannelWebhook, built from WebhookVariables and
	// the WEBHOOK_<NAME>_* variables.
	Webhook WebhookConfig
	// WebhookVariables are the webhook variables of fixed names, as read.
	WebhookVariables WebhookVariables
}

// WebhookVariables are the webhook variables whose names are fixed. The
// variables of each named destination (WEBHOOK_<NAME>_URL, _ACCOUNTS,
// _SECRET, _SECRET_FILE) are named by WEBHOOK_DESTINATIONS, so they cannot
// be tags: ConfigFromEnv reads them by name, and Variables documents them.
type WebhookVariables struct {
	DefaultURL   string   `env:"WEBHOOK_DEFAULT_URL" secret:"endpoint" help:"webhook URL of the accounts no destination lists; https:// (logged without user info or query)"`
	Secret       Secret   `env:"WEBHOOK_SECRET" secret:"true" help:"that URL's HMAC-SHA256 key(s), at least 16 characters; new,old while rotating"`
	SecretFile   string   `env:"WEBHOOK_SECRET_FILE" help:"a file holding WEBHOOK_SECRET instead (a mounted secret)"`
	Destinations []string `env:"WEBHOOK_DESTINATIONS" help:"names of the other receivers, e.g. ACME,GLOBEX; each has its WEBHOOK_<NAME>_* variables"`
	URLs         string   `env:"WEBHOOK_URLS" secret:"true" help:"refused: it gave every account one shared secret; use WEBHOOK_DESTINATIONS"`
}

// WebhookConfig configures the webhook channel.
type WebhookConfig struct {
	// Default receives the notifications of accounts that no named
	// destination lists (WEBHOOK_DEFAULT_URL, WEBHOOK_SECRET); its URL
	// empty: those accounts get none.
	Default Destination
	// Destinations are the named destinations (WEBHOOK_DESTINATIONS), each
	// with its own accounts and secrets.
	Destinations []Destination
	// Timeout bounds one request.
	Timeout time.Duration `env:"WEBHOOK_TIMEOUT" envDefault:"5s" help:"timeout of one webhook request (a timeout is retried)"`
	// AllowHTTP accepts http:// destination URLs: development and tests
	// only, where receivers listen on plain HTTP. Otherwise every URL must
	// be https://, so that the signed body, the event id and the
	// receiver's URL token travel encrypted.
	AllowHTTP bool `env:"WEBHOOK_ALLOW_HTTP" envDefault:"false" help:"true accepts http:// webhook URLs (development only; otherwise https:// is required)"`
}

// Destination is one webhook receiver: its URL, the source accounts it is
// told about, and its own signing secrets, so that no receiver holds a key
// that authenticates messages to another (CONTRACTS.md section 8.1).
type Destination struct {
	// Name is the destination's name in WEBHOOK_DESTINATIONS; "" for the
	// default destination.
	Name string
	// URL receives the webhooks (WEBHOOK_<NAME>_URL).
	URL string
	// Accounts are the source accounts sent here (WEBHOOK_<NAME>_ACCOUNTS).
	Accounts []string
	// Secrets sign every request: one, or two during a rotation, each
	// giving one v1 signature (WEBHOOK_<NAME>_SECRET or _SECRET_FILE).
	Secrets []Secret
	// SecretVar names the variable the secrets came from, so that errors
	// name it and never a value.
	SecretVar string
}

// maxSecrets is how many secrets a destination may have: the new and the
// old one while a rotation is under way.
const maxSecrets = 2

// destinationName is the shape of a name in WEBHOOK_DESTINATIONS: it
// becomes part of variable names.
var destinationName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,31}$`)

// DefaultConfig is the configuration before the environment is read.
func DefaultConfig() Config {
	return Config{
		Config: platform.DefaultConfig(Service, ":8083"),
		Topics: events.DefaultTopics,
		Group:  DefaultGroup,
	}
}

// Variables are the variables ConfigFromEnv reads, with their defaults and
// descriptions (the binary's --help): the declared ones, then those of
// each named destination.
func Variables() []envconfig.Var {
	return append(envconfig.Vars(DefaultConfig()),
		envconfig.Var{Name: "WEBHOOK_<NAME>_URL", Help: "destination NAME's URL (required per name)"},
		envconfig.Var{Name: "WEBHOOK_<NAME>_ACCOUNTS", Help: "source accounts sent to NAME: CC-1,CC-2 (required per name)"},
		envconfig.Var{Name: "WEBHOOK_<NAME>_SECRET", Help: "NAME's own key(s), same rules as WEBHOOK_SECRET (this or _SECRET_FILE is required per name)", Secret: true},
		envconfig.Var{Name: "WEBHOOK_<NAME>_SECRET_FILE", Help: "a file holding WEBHOOK_<NAME>_SECRET instead"},
	)
}

// ConfigFromEnv reads the configuration declared by Config's tags and the
// variables of each destination WEBHOOK_DESTINATIONS names (see Variables,
// or "notifications --help").
//
// A secret variable holds one HMAC-SHA256 key of at least 16 characters,
// or two separated by a comma while it is rotated (every delivery is then
// signed with both). WEBHOOK_URLS, which gave several accounts one shared
// secret, is refused. With NOTIFY_CHANNEL=webhook, WEBHOOK_DEFAULT_URL or
// WEBHOOK_DESTINATIONS is required. Every problem is reported at once.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	errs := []error{envconfig.Parse(getenv, &cfg, platform.ParseOptions()...), cfg.Complete()}
	v := cfg.WebhookVariables
	if v.URLs != "" {
		errs = append(errs, errors.New("WEBHOOK_URLS is no longer read: it gave every account one shared secret; "+
			"list each receiver in WEBHOOK_DESTINATIONS with its own WEBHOOK_<NAME>_URL, _ACCOUNTS and _SECRET"))
	}
	cfg.Webhook.Default = Destination{URL: v.DefaultURL, SecretVar: "WEBHOOK_SECRET"}
	secrets, err := readSecrets("WEBHOOK_SECRET", string(v.Secret), v.SecretFile)
	cfg.Webhook.Default.Secrets = secrets
	errs = append(errs, err)
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	for _, name := range v.Destinations {
		if !destinationName.MatchString(name) {
			errs = append(errs, fmt.Errorf("WEBHOOK_DESTINATIONS: %q is not a name of A-Z, 0-9 and _ starting with a letter", name))
			continue
		}
		prefix := "WEBHOOK_" + name + "_"
		d := Destination{Name: name, URL: get(prefix + "URL"), SecretVar: prefix + "SECRET", Accounts: envconfig.List(get(prefix + "ACCOUNTS"))}
		d.Secrets, err = readSecrets(d.SecretVar, get(d.SecretVar), get(d.SecretVar+"_FILE"))
		errs = append(errs, err)
		cfg.Webhook.Destinations = append(cfg.Webhook.Destinations, d)
	}
	errs = append(errs, cfg.validate())
	return cfg, envconfig.Join(errs...)
}

// readSecrets reads the comma-separated secrets of variable name (raw), or
// of the file named by name_FILE (file), for secrets mounted as files.
// Errors name the variable, never a value.
func readSecrets(name, raw, file string) ([]Secret, error) {
	switch {
	case raw != "" && file != "":
		return nil, fmt.Errorf("%s and %s_FILE are both set; set one", name, name)
	case file != "":
		b, err := os.ReadFile(file) //nolint:gosec // the operator names the file
		if err != nil {
			return nil, fmt.Errorf("%s_FILE: %w", name, err)
		}
		raw = strings.TrimSpace(string(b))
	}
	if raw == "" {
		return nil, nil
	}
	var out []Secret
	for part := range strings.SplitSeq(raw, ",") {
		out = append(out, Secret(strings.TrimSpace(part)))
	}
	return out, nil
}

// validate checks the service's own settings: the channel, and the
// webhook destinations when it is the webhook.
func (c Config) validate() error {
	var errs []error
	switch c.Channel {
	case ChannelLog:
	case ChannelWebhook:
		errs = append(errs, c.Webhook.validate()...)
	default:
		errs = append(errs, fmt.Errorf("NOTIFY_CHANNEL: %q is neither log nor webhook", c.Channel))
	}
	return errors.Join(errs...)
}

func (w WebhookConfig) validate() []error {
	var errs []error
	if w.Default.URL == "" && len(w.Destinations) == 0 {
		errs = append(errs, errors.New("NOTIFY_CHANNEL=webhook needs WEBHOOK_DEFAULT_URL or WEBHOOK_DESTINATIONS"))
	}
	if w.Default.URL != "" {
		errs = append(errs, checkURL("WEBHOOK_DEFAULT_URL", w.Default.URL, w.AllowHTTP), checkSecrets(w.Default))
	} else if len(w.Default.Secrets) > 0 {
		errs = append(errs, fmt.Errorf("%s is set but WEBHOOK_DEFAULT_URL is not: no destination would use it", w.Default.SecretVar))
	}
	names := map[string]bool{}
	owner := map[string]string{} // account -> destination
	for _, d := range w.Destinations {
		prefix := "WEBHOOK_" + d.Name + "_"
		if names[d.Name] {
			errs = append(errs, fmt.Errorf("WEBHOOK_DESTINATIONS: %s listed twice", d.Name))
			continue
		}
		names[d.Name] = true
		if d.URL == "" {
			errs = append(errs, fmt.Errorf("%sURL is required", prefix))
		} else {
			errs = append(errs, checkURL(prefix+"URL", d.URL, w.AllowHTTP))
		}
		if len(d.Accounts) == 0 {
			errs = append(errs, fmt.Errorf("%sACCOUNTS is required: the source accounts sent to %s", prefix, d.Name))
		}
		for _, a := range d.Accounts {
			if other, dup := owner[a]; dup {
				errs = append(errs, fmt.Errorf("%sACCOUNTS: account %q is also in WEBHOOK_%s_ACCOUNTS", prefix, a, other))
			}
			owner[a] = d.Name
		}
		errs = append(errs, checkSecrets(d))
	}
	// One receiver must never hold a key that signs another's messages.
	used := map[Secret]string{}
	for _, d := range append([]Destination{w.Default}, w.Destinations...) {
		for _, s := range d.Secrets {
			if other, dup := used[s]; dup && other != d.SecretVar {
				errs = append(errs, fmt.Errorf("%s and %s share a secret; each destination needs its own", other, d.SecretVar))
			}
			used[s] = d.SecretVar
		}
	}
	if w.Timeout <= 0 {
		errs = append(errs, errors.New("WEBHOOK_TIMEOUT must be positive"))
	}
	return errs
}

// checkSecrets checks d's secrets, naming the variable and never a value.
func checkSecrets(d Destination) error {
	switch {
	case len(d.Secrets) == 0:
		return fmt.Errorf("%s (or %s_FILE) is required", d.SecretVar, d.SecretVar)
	case len(d.Secrets) > maxSecrets:
		return fmt.Errorf("%s holds %d secrets; at most %d (the new and the old one during a rotation)",
			d.SecretVar, len(d.Secrets), maxSecrets)
	case len(d.Secrets) == 2 && d.Secrets[0] == d.Secrets[1]:
		return fmt.Errorf("%s holds the same secret twice", d.SecretVar)
	}
	for _, s := range d.Secrets {
		if len(s) < minSecretLen {
			return fmt.Errorf("%s: every secret must have at least %d characters", d.SecretVar, minSecretLen)
		}
	}
	return nil
}

// checkURL refuses a destination URL that is not absolute https:// (or
// http:// with allowHTTP), naming it without user info or query
// (envconfig.RedactURL), where a receiver's token may be.
func checkURL(name, raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("%s: %s is not an absolute https:// URL", name, envconfig.RedactURL(raw))
	case u.Scheme == "http" && !allowHTTP:
		return fmt.Errorf("%s: %s is http://: webhooks need https:// (WEBHOOK_ALLOW_HTTP=true accepts http:// in development)",
			name, envconfig.RedactURL(raw))
	}
	return nil
}

// channel returns the webhook channel's configuration: every listed
// account mapped to its destination, each with its own secrets.
func (w WebhookConfig) channel() channels.WebhookConfig {
	dest := func(d Destination) channels.Destination {
		out := channels.Destination{URL: d.URL}
		for _, s := range d.Secrets {
			out.Secrets = append(out.Secrets, []byte(s))
		}
		return out
	}
	cfg := channels.WebhookConfig{Default: dest(w.Default), Accounts: map[string]channels.Destination{}, Timeout: w.Timeout}
	for _, d := range w.Destinations {
		for _, a := range d.Accounts {
			cfg.Accounts[a] = dest(d)
		}
	}
	return cfg
}
