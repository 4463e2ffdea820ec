package suite_test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/console"
	"github.com/paysuite/payments/services/ledger"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/services/transfers"
)

// recorder is a getenv that remembers every name asked for. It answers
// what a valid configuration needs, so that no service stops reading early.
type recorder struct {
	mu    sync.Mutex
	names map[string]bool
}

func (r *recorder) getenv(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[name] = true
	switch name {
	case "DATABASE_URL":
		return "postgres://u@localhost/db"
	case "NOTIFY_CHANNEL":
		return "webhook"
	case "WEBHOOK_DEFAULT_URL":
		return "http://localhost:9999/hook"
	case "WEBHOOK_SECRET":
		return "0123456789abcdef0123"
	case "AUTH_JWKS_FILE":
		return "/etc/paysuite/jwks.json"
	case "AUTH_ISSUER":
		return "https://issuer.example"
	}
	return ""
}

// Every environment variable a service reads is in the README's
// configuration table, and every variable the table names is read by some
// service (or is one of the documented tool variables).
func TestEveryVariableIsDocumented(t *testing.T) {
	t.Parallel()
	r := &recorder{names: map[string]bool{}}
	if _, err := transfers.ConfigFromEnv(r.getenv); err != nil {
		t.Fatalf("transfers: %v", err)
	}
	if _, err := ledger.ConfigFromEnv(r.getenv); err != nil {
		t.Fatalf("ledger: %v", err)
	}
	if _, err := antifraud.ConfigFromEnv(r.getenv); err != nil {
		t.Fatalf("antifraud: %v", err)
	}
	if _, err := notifications.ConfigFromEnv(r.getenv); err != nil {
		t.Fatalf("notifications: %v", err)
	}
	if _, err := console.ConfigFromEnv(r.getenv); err != nil {
		t.Fatalf("console: %v", err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := configurationSection(t, string(readme))
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\|\\s*`([A-Z][A-Z0-9_]+)`").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	var missing []string
	for name := range r.names {
		if !documented[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("read by a service but not in the README's configuration table: %s", strings.Join(missing, ", "))
	}
	// Variables read outside ConfigFromEnv: the logger, tracing, the
	// all-in-one binary and the test harness.
	elsewhere := map[string]bool{
		"LOG_LEVEL": true, "LOG_FORMAT": true, "OTEL_EXPORTER_OTLP_ENDPOINT": true, "OTEL_TRACES_EXPORTER": true,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": true, "OTEL_SERVICE_NAME": true, "TEST_DATABASE_URL": true,
		"TEST_KAFKA_BROKERS": true, "TEST_KAFKA_LIBS": true, "DEMO_PG_PORT": true, "TRANSFERS_HTTP_ADDR": true, "LEDGER_HTTP_ADDR": true,
		"ANTIFRAUD_HTTP_ADDR": true, "NOTIFICATIONS_HTTP_ADDR": true,
	}
	var stale []string
	for name := range documented {
		if !r.names[name] && !elsewhere[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("in the README's configuration table but read by nothing: %s", strings.Join(stale, ", "))
	}
}

func configurationSection(t *testing.T, readme string) string {
	t.Helper()
	start := strings.Index(readme, "\n## Configuration")
	if start < 0 {
		t.Fatal(`README.md has no "## Configuration" section`)
	}
	rest := readme[start+1:]
	if end := strings.Index(rest[3:], "\n## "); end >= 0 {
		rest = rest[:end+3]
	}
	return rest
}
