package transfer_test

import (
	"context"
	"testing"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// recording is a HistoryStore that records the queries it is asked.
type recording struct{ queries []transfer.HistoryQuery }

func (r *recording) History(_ context.Context, q transfer.HistoryQuery) ([]transfer.Transfer, error) {
	r.queries = append(r.queries, q)
	return nil, nil
}

// TestHistoryParty: a client's listing is of its own party whatever it
// asks, an operator's of the client it names or of everyone, and a
// viewer that is neither a client nor an operator reads nothing at all
// (an empty party would be everyone's).
func TestHistoryParty(t *testing.T) {
	t.Parallel()
	store := &recording{}
	h, err := transfer.NewHistory(store, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		v     transfer.Viewer
		f     transfer.Filter
		party string
		read  bool
	}{
		{transfer.Viewer{Client: "client-a"}, transfer.Filter{}, "client-a", true},
		{transfer.Viewer{Client: "ana", All: true}, transfer.Filter{}, "", true},
		{transfer.Viewer{Client: "ana", All: true}, transfer.Filter{Client: "client-a"}, "client-a", true},
		{transfer.Viewer{}, transfer.Filter{}, "", false},
	} {
		store.queries = nil
		if _, err := h.List(ctx, tc.v, tc.f, 10, ""); err != nil {
			t.Fatalf("%+v: %v", tc.v, err)
		}
		if read := len(store.queries) == 1; read != tc.read || read && store.queries[0].Party != tc.party {
			t.Errorf("%+v %+v: queries %+v, want party %q read %v", tc.v, tc.f, store.queries, tc.party, tc.read)
		}
	}
	if _, err := transfer.NewHistory(store, make([]byte, 31)); err == nil {
		t.Error("a cursor key of 31 bytes was taken")
	}
}
