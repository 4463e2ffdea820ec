package platform_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/platform"
)

type serviceConfig struct {
	platform.Config
	Token string `env:"TEST_SERVICE_TOKEN" secret:"true" help:"a service secret"`
	// InboxRetention is a setting of the service's own, beside the common ones.
	InboxRetention time.Duration `env:"INBOX_RETENTION" envDefault:"336h" help:"how long processed-event rows are kept"`
}

// The effective configuration is logged once at start, in one
// "configuration" line keyed by variable name, and no secret is in the log.
func TestMainLogsTheConfigurationMasked(t *testing.T) {
	t.Parallel()
	const dbPassword, kafkaPassword, token = "db-pass-4242", "kafka-pass-4242", "token-4242-secret"
	env := map[string]string{
		"DATABASE_URL":         "postgres://payments:" + dbPassword + "@db.internal:5432/transfers?sslmode=disable",
		"KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USERNAME": "transfers", "KAFKA_SASL_PASSWORD": kafkaPassword,
		"AUTH_JWKS_FILE": "/etc/paysuite/jwks.json", "AUTH_ISSUER": "https://issuer.example",
		"TEST_SERVICE_TOKEN": token, "OUTBOX_LEASE": "40s", "LOG_FORMAT": "json",
	}
	var out bytes.Buffer
	ran := false
	err := platform.Main(context.Background(), []string{"svc"}, func(k string) string { return env[k] }, &out, platform.Binary[serviceConfig]{
		Service: "transfers",
		Config: func(getenv func(string) string) (serviceConfig, error) {
			c := serviceConfig{Config: platform.DefaultConfig("transfers", ":8080")}
			err := envconfig.Parse(getenv, &c, platform.ParseOptions()...)
			return c, envconfig.Join(err, c.Complete())
		},
		Variables:   func() []envconfig.Var { return envconfig.Vars(serviceConfig{}) },
		DatabaseURL: func(c serviceConfig) string { return c.DatabaseURL },
		Run: func(context.Context, serviceConfig, *slog.Logger, func(net.Addr)) error {
			ran = true
			return nil
		},
	})
	if err != nil || !ran {
		t.Fatalf("Main = %v, ran %v", err, ran)
	}
	for _, secret := range []string{dbPassword, kafkaPassword, token} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("the log shows a secret (%q):\n%s", secret, out.String())
		}
	}
	var lines []map[string]any
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line["msg"] == "configuration" {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d configuration lines, want 1", len(lines))
	}
	cfg, _ := lines[0]["config"].(map[string]any)
	for name, want := range map[string]string{
		"DATABASE_URL":        "postgres://payments:xxxxx@db.internal:5432/transfers?sslmode=disable",
		"KAFKA_SASL_PASSWORD": "***", "TEST_SERVICE_TOKEN": "***", "KAFKA_SASL_USERNAME": "transfers",
		"OUTBOX_LEASE": "40s", "HTTP_ADDR": ":8080", "OUTBOX_RELAY_ENABLED": "true", "INBOX_RETENTION": "336h",
	} {
		if cfg[name] != want {
			t.Errorf("config[%s] = %v, want %q", name, cfg[name], want)
		}
	}
	if len(cfg) != len(envconfig.Vars(serviceConfig{})) {
		t.Errorf("the configuration line has %d variables, the declaration %d", len(cfg), len(envconfig.Vars(serviceConfig{})))
	}
}

// The defaults of the common declaration are the Go constants they stand
// for.
func TestCommonDefaults(t *testing.T) {
	t.Parallel()
	c := platform.DefaultConfig("transfers", ":8080")
	err := envconfig.Parse(func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://x/y"}[k]
	}, &c, platform.ParseOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.MaxMessageBytes != 1<<20 || strings.Join(c.Kafka.Brokers, ",") != broker.DefaultAddr || bool(c.RelayDisabled) ||
		c.Auth.Audience != auth.DefaultAudience || c.Auth.RateRPS != auth.DefaultRateRPS || c.Auth.RateBurst != auth.DefaultRateBurst || !c.MigrateOnStart {
		t.Errorf("defaults = %+v", c)
	}
	c2 := platform.DefaultConfig("transfers", ":8080")
	err = envconfig.Parse(func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://x/y", "OUTBOX_RELAY_ENABLED": "false", "DATABASE_MAX_CONNS": "lots"}[k]
	}, &c2, platform.ParseOptions()...)
	if !bool(c2.RelayDisabled) || err == nil || err.Error() != `DATABASE_MAX_CONNS: "lots" is not an integer` {
		t.Errorf("OUTBOX_RELAY_ENABLED=false: RelayDisabled %v; bad DATABASE_MAX_CONNS: %v", c2.RelayDisabled, err)
	}
}

// A binary without a database (DatabaseURL nil) runs and prints its help
// like the others, and has no migrate command: its help does not offer one
// and "migrate" is refused before the configuration is read.
func TestMainWithoutDatabaseHasNoMigrate(t *testing.T) {
	t.Parallel()
	read := false
	b := platform.Binary[platform.LogConfig]{
		Service: "console",
		Config: func(func(string) string) (platform.LogConfig, error) {
			read = true
			return platform.LogConfig{}, nil
		},
		Variables: func() []envconfig.Var { return nil },
		Run:       func(context.Context, platform.LogConfig, *slog.Logger, func(net.Addr)) error { return nil },
	}
	getenv := func(string) string { return "" }
	var help bytes.Buffer
	if err := platform.Main(context.Background(), []string{"console", "--help"}, getenv, &help, b); err != nil {
		t.Fatalf("--help: %v", err)
	}
	if strings.Contains(help.String(), "migrate") {
		t.Errorf("the help offers migrate:\n%s", help.String())
	}
	var out bytes.Buffer
	err := platform.Main(context.Background(), []string{"console", "migrate"}, getenv, &out, b)
	if err == nil || !strings.Contains(err.Error(), `unknown command ["migrate"]`) || read {
		t.Errorf("migrate: err = %v, configuration read %v; want an unknown command before the configuration", err, read)
	}
	if err := platform.Main(context.Background(), []string{"console"}, getenv, &out, b); err != nil || !read {
		t.Errorf("run: err = %v, configuration read %v", err, read)
	}
}
