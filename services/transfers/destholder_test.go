package transfers_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
)

// TestDestinationHolderReadsTheTransfer: once the ledger's
// TransferenciaLiquidada, read from Kafka, names client-b as the
// destination's titular, client-b reads the transfer with GET
// /transferencias/{id}, in the shape its creator sees; client-c gets the
// very answer of an unknown id, and so does client-b for a transfer paid
// into its account that has not settled.
func TestDestinationHolderReadsTheTransfer(t *testing.T) {
	t.Parallel()
	s := start(t)
	paid, unsettled := uuid.NewString(), uuid.NewString()
	s.post(t, paid, body("CC-001", "CC-LOJA", 100), nil)
	s.post(t, unsettled, body("CC-001", "CC-LOJA", 200), nil)
	w := kafkatest.NewWriter(t, broker.Config{Brokers: s.brokers})
	defer w.Close()
	id := uuid.MustParse(paid)
	produce(t, w, s.topics.Settled, events.TypeSettled, events.Settled{EventID: events.DerivedID(events.KindSettled, id), TransferID: id,
		OccurredAt: time.Now().UTC(), DestHolder: "client-b"})
	poll.True(t, 30*time.Second, "the transfer to be LIQUIDADA", func() bool { return s.status(t, paid)["status"] == "LIQUIDADA" })

	as := func(client, id string) (int, string) {
		t.Helper()
		code, _, b := s.do(t, http.MethodGet, "/transferencias/"+id,
			map[string]string{"Authorization": s.iss.Bearer(t, client, auth.ScopeTransfersRead)}, "")
		return code, string(b)
	}
	creator, _, _ := s.do(t, http.MethodGet, "/transferencias/"+paid, nil, "")
	code, got := as("client-b", paid)
	if code != http.StatusOK || creator != http.StatusOK {
		t.Fatalf("GET by the destination's titular = %d %s (creator %d), want 200", code, got, creator)
	}
	_, _, want := s.do(t, http.MethodGet, "/transferencias/"+paid, nil, "")
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("the titular's view differs from the creator's (-creator +titular):\n%s", diff)
	}
	unknownCode, unknown := as("client-c", uuid.NewString())
	for _, tc := range []struct{ client, id string }{{"client-c", paid}, {"client-b", unsettled}} {
		code, got := as(tc.client, tc.id)
		if code != http.StatusNotFound || code != unknownCode || !cmp.Equal(problemOf(t, got), problemOf(t, unknown)) {
			t.Errorf("GET %s as %s = %d %s, want the answer to an unknown id: %d %s", tc.id, tc.client, code, got, unknownCode, unknown)
		}
	}
}

// problemOf is the problem+json body b without the fields that name the
// request (instance, requestId).
func problemOf(t *testing.T, b string) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(b), &p); err != nil {
		t.Fatalf("not a problem: %s", b)
	}
	delete(p, "instance")
	delete(p, "requestId")
	return p
}
