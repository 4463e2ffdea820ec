package outbox

import "testing"

// The relay reads synchronous_standby_names as the server matches it.
func TestMatchesSyncNames(t *testing.T) {
	const app = "paysuite_outbox_transfers"
	for _, c := range []struct {
		v    string
		want bool
		bad  bool
	}{
		{v: "", want: false},
		{v: "*", want: true},
		{v: `"*"`, want: true},
		{v: "pg_b", want: false},
		{v: "pg_b, *", want: true},
		{v: "FIRST 1 (pg_b, pg_c)", want: false},
		{v: `FIRST 1 ("pg-1", "pg-2")`, want: false},
		{v: "ANY 2 (pg_b, *)", want: true},
		{v: "2 (pg_b, Paysuite_Outbox_Transfers)", want: true},
		{v: `first 1 ("PAYSUITE_OUTBOX_TRANSFERS")`, want: true},
		{v: "paysuite_outbox_transfers2", want: false},
		{v: `"pg ""b"""`, want: false},
		{v: `FIRST 1 ("pg-1"`, bad: true},
		{v: `"pg-1`, bad: true},
	} {
		got, err := matchesSyncNames(c.v, app)
		if (err != nil) != c.bad {
			t.Errorf("matchesSyncNames(%q) error %v, want an error: %v", c.v, err, c.bad)
			continue
		}
		if got != c.want {
			t.Errorf("matchesSyncNames(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}
