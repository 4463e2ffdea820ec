package suite_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/ledger"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/services/transfers"
)

// The ACLs of `payments topics create --acls` name the consumer groups the
// services use: pkg/broker cannot import the services, so its copy of the
// names is checked against theirs here.
func TestACLGroupsAreTheServicesGroups(t *testing.T) {
	t.Parallel()
	env := func(extra map[string]string) func(string) string {
		m := map[string]string{
			"DATABASE_URL": "postgres://u@localhost/db", "NOTIFY_CHANNEL": "webhook",
			"WEBHOOK_DEFAULT_URL": "http://localhost:9999/hook", "WEBHOOK_ALLOW_HTTP": "true", "WEBHOOK_SECRET": "0123456789abcdef0123",
			"AUTH_JWKS_FILE": "jwks.json", "AUTH_ISSUER": "paysuite-test",
			"TRANSFERS_AUTHORIZATION_KEY_FILE": "transfer-key.jwk", "LEDGER_AUTHORIZATION_JWKS_FILE": "transfer-jwks.json",
		}
		for k, v := range extra {
			m[k] = v
		}
		return func(k string) string { return m[k] }
	}
	tc, err := transfers.ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	lc, err := ledger.ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	ac, err := antifraud.ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := notifications.ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := broker.Groups{
		Projection: tc.ProjectionGroup, Antifraud: ac.Group, Ledger: lc.Group,
		LedgerCommands: lc.CommandsGroup, LedgerRefunds: lc.RefundsGroup, LedgerDLTMonitor: lc.DLTMonitorGroup,
		Notifications: nc.Group,
	}
	if diff := cmp.Diff(broker.DefaultGroups, got); diff != "" {
		t.Errorf("broker.DefaultGroups mismatch (-acls +services):\n%s", diff)
	}
}

// A bad Kafka security setting stops every service at start, with the rest
// of its configuration problems, each naming its variable and no value.
func TestKafkaSecurityMistakesStopEveryService(t *testing.T) {
	t.Parallel()
	const password = "do-not-print-me" //nolint:gosec // a test's secret
	m := map[string]string{
		"NOTIFY_CHANNEL": "webhook", "WEBHOOK_DEFAULT_URL": "http://localhost:9999/hook", "WEBHOOK_ALLOW_HTTP": "true", "WEBHOOK_SECRET": "0123456789abcdef0123",
		"KAFKA_SASL_MECHANISM": "SCRAM-SHA-1", "KAFKA_SASL_USERNAME": "ledger", "KAFKA_SASL_PASSWORD": password,
		"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": t.TempDir() + "/no-such-ca.pem",
	}
	getenv := func(k string) string { return m[k] }
	want := []string{
		"DATABASE_URL is required",
		"KAFKA_SASL_MECHANISM: unsupported mechanism (want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN)",
		"KAFKA_TLS_CA_FILE: cannot read the file: no such file or directory",
	}
	configs := map[string]func() error{
		"transfers":     func() error { _, err := transfers.ConfigFromEnv(getenv); return err },
		"ledger":        func() error { _, err := ledger.ConfigFromEnv(getenv); return err },
		"antifraud":     func() error { _, err := antifraud.ConfigFromEnv(getenv); return err },
		"notifications": func() error { _, err := notifications.ConfigFromEnv(getenv); return err },
	}
	for name, config := range configs {
		err := config()
		if err == nil {
			t.Errorf("%s accepted the configuration", name)
			continue
		}
		msg := err.Error()
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: the error does not say %q:\n%s", name, w, msg)
			}
		}
		if strings.Contains(msg, password) || strings.Contains(msg, "no-such-ca.pem") || strings.Contains(msg, "SCRAM-SHA-1") {
			t.Errorf("%s: the error shows a value:\n%s", name, msg)
		}
	}
}
