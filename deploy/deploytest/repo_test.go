package deploytest

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/console"
)

// service describes one of the four services as every artefact must agree.
type service struct {
	Name string
	Port int
	// Binary is the program inside the image.
	Binary string
}

// services are the four services and their ports (CONTRACTS.md section 0).
var services = []service{
	{Name: "transfers", Port: 8080, Binary: "/usr/local/bin/transfers"},
	{Name: "ledger", Port: 8081, Binary: "/usr/local/bin/ledger"},
	{Name: "antifraud", Port: 8082, Binary: "/usr/local/bin/antifraud"},
	{Name: "notifications", Port: 8083, Binary: "/usr/local/bin/notifications"},
}

// suiteBinary is the operator / all-in-one program inside the image.
const suiteBinary = "/usr/local/bin/payments"

// repoRoot returns the module root: the nearest parent with go.mod.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// knownEnv returns every environment variable a suite program reads, so that
// a misspelt name in an artefact (KAFKA_BROKER, say) fails a test instead of
// being silently ignored. The common ones are recorded from
// platform.ConfigFromEnv itself; the rest are read by the binaries' main or
// by one service, or by the Go runtime.
func knownEnv(tb testing.TB) map[string]bool {
	tb.Helper()
	known := map[string]bool{}
	record := func(name string) string { known[name] = true; return "" }
	platform.ConfigFromEnv(platform.NewEnv(record), "transfers", ":8080")
	_, _ = console.ConfigFromEnv(record)
	if len(known) < 5 {
		tb.Fatalf("platform.ConfigFromEnv read only %v: the recording getenv is not used", sortedKeys(known))
	}
	for _, name := range []string{
		"LOG_LEVEL", "LOG_FORMAT", // every main
		"NOTIFY_CHANNEL", "WEBHOOK_DEFAULT_URL", "WEBHOOK_SECRET", // notifications
		"GOMEMLIMIT", // the Go runtime
	} {
		known[name] = true
	}
	return known
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
