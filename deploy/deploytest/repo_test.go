package deploytest

import (
	"sort"
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/services/console"
	"github.com/paysuite/payments/services/ledger"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/services/transfers"
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

// knownEnv returns every environment variable a suite program reads, so that
// a misspelt name in an artefact (KAFKA_BROKER, say) fails a test instead of
// being silently ignored: the variables the services and the console
// declare (their Variables, and the logger's), and the Go runtime's.
func knownEnv(tb testing.TB) map[string]bool {
	tb.Helper()
	known := map[string]bool{}
	for _, vars := range [][]envconfig.Var{
		transfers.Variables(), ledger.Variables(), antifraud.Variables(), notifications.Variables(),
		console.Variables(), envconfig.Vars(platform.LogConfig{}),
	} {
		for _, v := range vars {
			known[v.Name] = true
		}
	}
	if len(known) < 5 {
		tb.Fatalf("only %v are known: the declarations are not read", sortedKeys(known))
	}
	known["GOMEMLIMIT"] = true // the Go runtime
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
