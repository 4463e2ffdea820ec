package suite_test

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/platform"
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
		return "https://hooks.example/hook"
	case "WEBHOOK_SECRET":
		return "0123456789abcdef0123"
	case "AUTH_JWKS_FILE":
		return "/etc/paysuite/jwks.json"
	case "TRANSFERS_AUTHORIZATION_KEY_FILE":
		return "/etc/paysuite/transfer-authorization-key.jwk"
	case "LEDGER_AUTHORIZATION_JWKS_FILE":
		return "/etc/paysuite/transfer-authorization-jwks.json"
	case "AUTH_ISSUER":
		return "https://issuer.example"
	}
	return ""
}

// declared are the variables the services declare (their Variables, and
// the logger's), each with the services that read it and its defaults.
func declared() map[string]*declaration {
	out := map[string]*declaration{}
	add := func(service string, vars []envconfig.Var) {
		for _, v := range vars {
			d := out[v.Name]
			if d == nil {
				d = &declaration{Var: v, defaults: map[string]bool{}}
				out[v.Name] = d
			}
			d.services = append(d.services, service)
			if v.Default != "" {
				d.defaults[v.Default] = true
			}
		}
	}
	add("transfers", transfers.Variables())
	add("ledger", ledger.Variables())
	add("antifraud", antifraud.Variables())
	add("notifications", notifications.Variables())
	add("console", console.Variables())
	add("all", envconfig.Vars(platform.LogConfig{}))
	return out
}

type declaration struct {
	envconfig.Var
	services []string
	defaults map[string]bool
}

// The README's configuration table is checked against the declarations:
// every declared variable has a row whose default column shows its
// default(s), every row names a declared variable (or one of the
// documented others), and every variable a service reads is declared.
func TestEveryVariableIsDocumented(t *testing.T) {
	t.Parallel()
	decl := declared()
	// What the services read is what they declare: nothing is read by hand
	// behind the declaration's back.
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
	var undeclared []string
	for name := range r.names {
		if decl[name] == nil {
			undeclared = append(undeclared, name)
		}
	}
	sort.Strings(undeclared)
	if len(undeclared) > 0 {
		t.Errorf("read by a service but not declared in its configuration: %s", strings.Join(undeclared, ", "))
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := configurationSection(t, string(readme))
	rows := map[string]string{} // variable -> its row's default column
	for _, m := range regexp.MustCompile(`(?m)^\|([^|]*)\|([^|]*)\|`).FindAllStringSubmatch(section, -1) {
		for _, n := range regexp.MustCompile("`([A-Z][A-Z0-9_]+)`").FindAllStringSubmatch(m[1], -1) {
			rows[n[1]] = m[2]
		}
	}
	var missing, wrongDefault []string
	for name, d := range decl {
		if strings.Contains(name, "<") { // WEBHOOK_<NAME>_URL and the like: named in the prose
			if !strings.Contains(section, "`"+name+"`") {
				missing = append(missing, name)
			}
			continue
		}
		def, ok := rows[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		for want := range d.defaults {
			if !d.Secret && !strings.Contains(def, "`"+want+"`") {
				wrongDefault = append(wrongDefault, fmt.Sprintf("%s (declared %q, table %q)", name, want, strings.TrimSpace(def)))
			}
		}
		if d.Required && !strings.Contains(def, "required") {
			wrongDefault = append(wrongDefault, name+" is required; the table does not say so")
		}
	}
	sort.Strings(missing)
	sort.Strings(wrongDefault)
	if len(missing) > 0 {
		t.Errorf("declared but not in the README's configuration table: %s", strings.Join(missing, ", "))
	}
	if len(wrongDefault) > 0 {
		t.Errorf("the README's configuration table gives another default:\n%s", strings.Join(wrongDefault, "\n"))
	}
	// Variables read outside the services' declarations: tracing, the
	// all-in-one binary and the test harness.
	elsewhere := map[string]bool{
		"OTEL_EXPORTER_OTLP_ENDPOINT": true, "OTEL_TRACES_EXPORTER": true,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": true, "OTEL_SERVICE_NAME": true, "TEST_DATABASE_URL": true,
		"TEST_KAFKA_BROKERS": true, "TEST_KAFKA_LIBS": true, "DEMO_PG_PORT": true, "TRANSFERS_HTTP_ADDR": true, "LEDGER_HTTP_ADDR": true,
		"ANTIFRAUD_HTTP_ADDR": true, "NOTIFICATIONS_HTTP_ADDR": true,
	}
	var stale []string
	for name := range rows {
		if decl[name] == nil && !elsewhere[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("in the README's configuration table but declared nowhere: %s", strings.Join(stale, ", "))
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
