package history

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const hangFault = "SIGSTOP primary of the transfers pair for 30s, standby promoted, SIGCONT, fenced"

func unfenced(from, to float64, fault string, dbs ...string) Op {
	return Op{Kind: KindUnfenced, Invoke: at(from), Complete: at(to), Outcome: Info, Unfenced: &Unfenced{Fault: fault, Databases: dbs}}
}

// TestUnfencedWindowExplainsOnlyItsStaleReads: a stale read (k3's 202,
// done at 3.1, then a 404) answered while a former primary of the
// transfers database ran unfenced is explained, as the chaos-cluster's
// hung primary resumed before its fencing explains it; the same read
// after the window, or with the window on the other pair, is reported,
// and so is a second stale read of the key outside the window.
func TestUnfencedWindowExplainsOnlyItsStaleReads(t *testing.T) {
	t.Parallel()
	const other = "SIGSTOP primary of the ledger+antifraud+notifications pair for 30s, standby promoted, SIGCONT, fenced"
	tests := []struct {
		name      string
		add       []Op
		stale     int
		explained []ExplainedStaleRead
	}{
		{"the 404 answered inside the window", []Op{get(3.5, 3.6, "k3", 404, ""), unfenced(3.4, 3.8, hangFault, "transfers")},
			0, []ExplainedStaleRead{{Key: "k3", Fault: hangFault}}},
		{"the 404 invoked before the window, answered in it", []Op{get(3.3, 3.5, "k3", 404, ""), unfenced(3.4, 3.8, hangFault, "transfers")},
			0, []ExplainedStaleRead{{Key: "k3", Fault: hangFault}}},
		{"the same 404 1 s after the window closed", []Op{get(4.8, 4.9, "k3", 404, ""), unfenced(3.4, 3.8, hangFault, "transfers")},
			1, nil},
		{"the 404 answered before the window opened", []Op{get(3.2, 3.3, "k3", 404, ""), unfenced(3.4, 3.8, hangFault, "transfers")},
			1, nil},
		{"the window on the other pair", []Op{get(3.5, 3.6, "k3", 404, ""), unfenced(3.4, 3.8, other, "ledger", "antifraud", "notifications")},
			1, nil},
		{"a second stale read of the key after the window", []Op{get(3.5, 3.6, "k3", 404, ""), get(4.8, 4.9, "k3", 404, ""),
			unfenced(3.4, 3.8, hangFault, "transfers")}, 1, nil},
		{"LIQUIDADA then PENDENTE inside the window", []Op{get(6, 6.1, "k1", 200, StatusPending), unfenced(5.9, 6.5, hangFault, "transfers")},
			0, []ExplainedStaleRead{{Key: "k1", Fault: hangFault}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Check(append(clean(), tc.add...))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Count(StaleRead) != tc.stale || len(rep.Anomalies) != tc.stale {
				t.Errorf("want %d stale-read and no other anomaly, got:\n%s", tc.stale, rep.Table())
			}
			if diff := cmp.Diff(tc.explained, rep.ExplainedReads); diff != "" {
				t.Errorf("explained stale reads mismatch (-want +got):\n%s", diff)
			}
			line := `allowed stale reads explained by an unfenced former primary in "` + hangFault + `": 1`
			if strings.Contains(rep.Table(), line) != (len(tc.explained) > 0) {
				t.Errorf("the table's line %q: want it %v:\n%s", line, len(tc.explained) > 0, rep.Table())
			}
		})
	}
}

func TestUnfencedRecordRoundTrip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := NewRecorder(&buf)
	r.Unfenced(at(1), at(2), Unfenced{Fault: hangFault, Databases: []string{"transfers"}})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(History{unfenced(1, 2, hangFault, "transfers")}, h); diff != "" {
		t.Errorf("history mismatch (-want +got):\n%s", diff)
	}
	if _, err := Check(History{unfenced(1, 2, hangFault)}); err == nil {
		t.Error("an unfenced window without its databases passed")
	}
}
