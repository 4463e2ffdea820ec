package broker_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
)

// TestSuiteACLs checks the grants of CONTRACTS.md section 8 from the
// resource side: who may write and who may read each topic and group.
func TestSuiteACLs(t *testing.T) {
	t.Parallel()
	tp := events.DefaultTopics
	acls := broker.SuiteACLs(tp, broker.DefaultGroups, broker.DefaultPrincipals)
	who := func(resource, name, op string) []string {
		var out []string
		for _, a := range acls {
			if a.Resource == resource && a.Name == name && a.Operation == op {
				out = append(out, a.Principal)
			}
		}
		slices.Sort(out)
		return out
	}
	retry := func(topic string, i int) string { return broker.RetryTopic(topic, broker.RetryDelays[i]) }
	tests := []struct {
		resource, name, op string
		want               []string
	}{
		{broker.ResourceTopic, tp.Requested, broker.OpWrite, []string{"User:transfers"}},
		{broker.ResourceTopic, tp.Requested, broker.OpRead, []string{"User:antifraud"}},
		{broker.ResourceTopic, tp.Analysed, broker.OpWrite, []string{"User:antifraud"}},
		{broker.ResourceTopic, tp.Analysed, broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.Settled, broker.OpWrite, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.Settled, broker.OpRead, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, tp.Rejected, broker.OpWrite, []string{"User:antifraud", "User:ledger"}},
		{broker.ResourceTopic, tp.Rejected, broker.OpRead, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, events.DLT(tp.Requested), broker.OpWrite, []string{"User:antifraud"}},
		{broker.ResourceTopic, events.DLT(tp.Analysed), broker.OpWrite, []string{"User:ledger"}},
		{broker.ResourceTopic, events.DLT(tp.Analysed), broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceTopic, events.DLT(tp.Settled), broker.OpWrite, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, events.DLT(tp.Settled), broker.OpRead, []string{"User:notifications"}},
		{broker.ResourceTopic, events.DLT(tp.Rejected), broker.OpRead, []string{"User:notifications"}},
		{broker.ResourceTopic, retry(tp.Settled, 0), broker.OpWrite, []string{"User:notifications"}},
		{broker.ResourceTopic, retry(tp.Rejected, 2), broker.OpRead, []string{"User:notifications"}},
		// Holds (CONTRACTS.md section 9): transfers writes the commands,
		// only the ledger reads them and writes reservada and cancelada,
		// which the projection and notifications read.
		{broker.ResourceTopic, tp.CaptureRequested, broker.OpWrite, []string{"User:transfers"}},
		{broker.ResourceTopic, tp.CaptureRequested, broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.CancelRequested, broker.OpWrite, []string{"User:transfers"}},
		{broker.ResourceTopic, tp.CancelRequested, broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.Reserved, broker.OpWrite, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.Reserved, broker.OpRead, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, tp.Cancelled, broker.OpWrite, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.Cancelled, broker.OpRead, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, events.DLT(tp.CaptureRequested), broker.OpWrite, []string{"User:ledger"}},
		{broker.ResourceTopic, events.DLT(tp.CancelRequested), broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceTopic, events.DLT(tp.Reserved), broker.OpWrite, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, events.DLT(tp.Cancelled), broker.OpRead, []string{"User:notifications"}},
		{broker.ResourceTopic, retry(tp.Reserved, 0), broker.OpWrite, []string{"User:notifications"}},
		{broker.ResourceTopic, retry(tp.Cancelled, 2), broker.OpRead, []string{"User:notifications"}},
		// Refunds (CONTRACTS.md section 10): transfers writes
		// estorno.solicitado, only the ledger reads it and writes the
		// results, which the projection and notifications read.
		{broker.ResourceTopic, tp.RefundRequested, broker.OpWrite, []string{"User:transfers"}},
		{broker.ResourceTopic, tp.RefundRequested, broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.RefundSettled, broker.OpWrite, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.RefundSettled, broker.OpRead, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, tp.RefundRejected, broker.OpWrite, []string{"User:ledger"}},
		{broker.ResourceTopic, tp.RefundRejected, broker.OpRead, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, events.DLT(tp.RefundRequested), broker.OpWrite, []string{"User:ledger"}},
		{broker.ResourceTopic, events.DLT(tp.RefundRequested), broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceTopic, events.DLT(tp.RefundSettled), broker.OpWrite, []string{"User:notifications", "User:transfers"}},
		{broker.ResourceTopic, retry(tp.RefundRejected, 1), broker.OpRead, []string{"User:notifications"}},
		{broker.ResourceGroup, "ledger-estornos", broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceGroup, "ledger-comandos", broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceGroup, "antifraude", broker.OpRead, []string{"User:antifraud"}},
		{broker.ResourceGroup, "ledger", broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceGroup, "ledger-dlt-monitor", broker.OpRead, []string{"User:ledger"}},
		{broker.ResourceGroup, "transferencias-projecao", broker.OpRead, []string{"User:transfers"}},
		{broker.ResourceGroup, "notificacoes", broker.OpRead, []string{"User:notifications"}},
		{broker.ResourceGroup, "notificacoes-retry-4000", broker.OpRead, []string{"User:notifications"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, who(tt.resource, tt.name, tt.op)); diff != "" {
			t.Errorf("%s %s %s mismatch (-want +got):\n%s", tt.op, tt.resource, tt.name, diff)
		}
	}
	// Every ACL names a topic of SuiteTopics or a group, and none repeats.
	topics := map[string]bool{}
	for _, s := range broker.SuiteTopics(tp, 1) {
		topics[s.Name] = true
	}
	seen := map[broker.ACL]bool{}
	for _, a := range acls {
		if a.Resource == broker.ResourceTopic && !topics[a.Name] {
			t.Errorf("%s names a topic the suite does not create", a)
		}
		if seen[a] {
			t.Errorf("%s twice", a)
		}
		seen[a] = true
	}
}

// CreateACLs refuses an ACL whose resource kind or operation it does not
// know, before it calls the cluster.
func TestCreateACLsRefusesUnknownKinds(t *testing.T) {
	t.Parallel()
	cfg := broker.Config{Brokers: []string{"127.0.0.1:1"}} // never reached
	for acl, want := range map[broker.ACL]string{
		{Principal: "User:ledger", Resource: "CLUSTER", Name: "c", Operation: broker.OpRead}:      "unknown resource kind",
		{Principal: "User:ledger", Resource: broker.ResourceTopic, Name: "t", Operation: "ALTER"}: "unknown operation",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := broker.CreateACLs(ctx, cfg, []broker.ACL{acl})
		cancel()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CreateACLs(%s) = %v, want an error with %q", acl, err, want)
		}
	}
}
