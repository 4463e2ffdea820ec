package platform

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/outbox"
)

// Config is what every service reads the same way: the one declaration of
// the common variables (pkg/envconfig's tags), embedded in each service's
// configuration. DefaultConfig gives a service's defaults.
type Config struct {
	// Service names the service in logs and its migration set.
	Service string `env:"-"`
	// HTTPAddr is where the service listens; each service has its own
	// default (DefaultConfig).
	HTTPAddr string `env:"HTTP_ADDR" help:"listen address of the API, /healthz, /readyz and /metrics"`
	// DatabaseURL is the service's own database.
	DatabaseURL string `env:"DATABASE_URL,required" secret:"url" help:"the service's own PostgreSQL database (its password is never logged)"`
	// DBMaxConns bounds the pool.
	DBMaxConns int `env:"DATABASE_MAX_CONNS" envDefault:"20" help:"connection pool size"`
	// Kafka says how to reach the brokers (KAFKA_BROKERS,
	// KAFKA_MAX_MESSAGE_BYTES); its Security is built from KafkaSecurity.
	Kafka broker.Config
	// KafkaSecurity are the KAFKA_SASL_* and KAFKA_TLS* variables.
	KafkaSecurity broker.SecuritySettings
	// Relay tunes the outbox relay (OUTBOX_*).
	Relay outbox.RelayConfig
	// RelayMode chooses the relay: RelayPolling (the default) or
	// RelayLogical, which reads the outbox from the WAL and needs
	// wal_level=logical and a role with REPLICATION.
	RelayMode string `env:"OUTBOX_RELAY" envDefault:"polling" help:"polling, or logical: read the outbox from the WAL (needs wal_level=logical and REPLICATION)"`
	// Logical tunes the logical relay (OUTBOX_LOGICAL_*).
	Logical outbox.LogicalConfig
	// MigrateOnStart applies migrations at start.
	MigrateOnStart bool `env:"MIGRATE_ON_START" envDefault:"true" help:"apply the migrations at start (<service> migrate applies them and exits)"`
	// RelayDisabled turns the outbox relay off (OUTBOX_RELAY_ENABLED=false)
	// when Debezium's outbox router publishes instead. The zero value runs
	// the relay.
	RelayDisabled Negated `env:"OUTBOX_RELAY_ENABLED" envDefault:"true" help:"false when Debezium's outbox router publishes instead of the relay"`
	// Auth says how requests are authenticated and rate-limited
	// (AUTH_JWKS_URL or AUTH_JWKS_FILE, AUTH_ISSUER, AUTH_AUDIENCE,
	// RATE_LIMIT_RPS, RATE_LIMIT_BURST). There is no way to turn it off.
	Auth auth.Config
	// AuthRefusals limits the requests refused for a missing or bad token
	// per source address (AUTH_REFUSED_RATE_RPS, AUTH_REFUSED_RATE_BURST,
	// AUTH_TRUSTED_PROXY_HEADER, AUTH_TRUSTED_PROXY_CIDRS).
	AuthRefusals auth.RefusalLimit
	// ShutdownDrain is how long the service keeps serving, /readyz
	// unready, once asked to stop (default DefaultShutdownDrain): longer
	// than a load balancer's probe period, so that it stops sending
	// requests before the listener closes. Zero closes the listener at
	// once.
	ShutdownDrain time.Duration `env:"SHUTDOWN_DRAIN" help:"how long a stopping service keeps serving with /readyz unready; 0s to 1m"`
	// RequestTimeout bounds the work of one request (httpapi.Deadline):
	// a database or broker that does not answer, or a commit waiting for
	// a stopped synchronous standby, gets a 503 within it rather than a
	// client left hanging. Shorter than clients' timeouts.
	RequestTimeout time.Duration `env:"HTTP_REQUEST_TIMEOUT" help:"longest a request's work may take before it is answered 503; 100ms to 1m"`
}

// Negated is a boolean variable that says the opposite of its field
// (OUTBOX_RELAY_ENABLED=false sets RelayDisabled), so that the field's zero
// value is the default behaviour.
type Negated bool

// String is the variable's value: "true" when the field is false.
func (n Negated) String() string { return strconv.FormatBool(!bool(n)) }

// parseNegated reads a Negated.
func parseNegated(s string) (Negated, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean", s)
	}
	return Negated(!b), nil
}

// ParseOptions are the parsers of the common configuration's own types,
// for envconfig.Parse.
func ParseOptions() []envconfig.Option {
	return []envconfig.Option{envconfig.WithParser(parseNegated)}
}

// DefaultShutdownDrain is SHUTDOWN_DRAIN's default: longer than the
// readiness probe period of the Kubernetes manifests (5 s) and of most load
// balancers' health checks.
const DefaultShutdownDrain = 5 * time.Second

// MaxShutdownDrain bounds SHUTDOWN_DRAIN: the drain, the HTTP shutdown
// timeout and the consumers' last batch must fit in the orchestrator's
// grace period (45 s in deploy/k8s) before it kills the process.
const MaxShutdownDrain = time.Minute

// ValidateShutdownDrain refuses a negative drain or one above
// MaxShutdownDrain.
func ValidateShutdownDrain(d time.Duration) error {
	if d < 0 || d > MaxShutdownDrain {
		return fmt.Errorf("SHUTDOWN_DRAIN: %s is outside [0, %s]", d, MaxShutdownDrain)
	}
	return nil
}

// ValidateRequestTimeout refuses an HTTP_REQUEST_TIMEOUT outside
// [100ms, 1m]: shorter would refuse ordinary requests, longer outlives the
// clients' own timeouts and the server's write timeout.
func ValidateRequestTimeout(d time.Duration) error {
	if d < 100*time.Millisecond || d > time.Minute {
		return fmt.Errorf("HTTP_REQUEST_TIMEOUT: %s is outside [100ms, 1m]", d)
	}
	return nil
}

// DefaultConfig is the common configuration of service, listening on
// httpAddr, before the environment is read: the defaults that are Go
// values (the envDefault tags give the others; a field has one or the
// other, never both).
func DefaultConfig(service, httpAddr string) Config {
	return Config{
		Service:        service,
		HTTPAddr:       httpAddr,
		Kafka:          broker.Config{Brokers: []string{broker.DefaultAddr}, MaxMessageBytes: broker.DefaultMaxMessageBytes},
		Relay:          outbox.DefaultRelayConfig(),
		Logical:        outbox.DefaultLogicalConfig(),
		Auth:           auth.DefaultConfig(),
		AuthRefusals:   auth.DefaultRefusalLimit,
		ShutdownDrain:  DefaultShutdownDrain,
		RequestTimeout: httpapi.DefaultRequestTimeout,
	}
}

// Complete checks the common configuration once it is parsed and builds
// what the variables describe (the Kafka credential and TLS from
// KafkaSecurity). It returns every problem at once.
func (c *Config) Complete() error {
	sec, err := c.KafkaSecurity.Security()
	c.Kafka.Security = sec
	return errors.Join(err, c.Auth.Validate(), c.AuthRefusals.Validate(), ValidateShutdownDrain(c.ShutdownDrain), ValidateRequestTimeout(c.RequestTimeout), c.validateRelayMode())
}

// The relay modes of OUTBOX_RELAY.
const (
	RelayPolling = "polling"
	RelayLogical = "logical"
)

func (c *Config) validateRelayMode() error {
	switch c.RelayMode {
	case "", RelayPolling:
		return nil
	case RelayLogical:
		return c.Logical.Validate()
	}
	return fmt.Errorf("OUTBOX_RELAY: %q is neither %q nor %q", c.RelayMode, RelayPolling, RelayLogical)
}
