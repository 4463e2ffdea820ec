package outbox

import "testing"

func TestSnapshotVisible(t *testing.T) {
	const wrap = uint64(1) << 32
	cases := []struct {
		snap string
		xid  uint32
		want bool
	}{
		{"100:105:", 99, true},          // finished before xmin
		{"100:105:", 104, true},         // between, not running
		{"100:105:102,103", 102, false}, // running
		{"100:105:102,103", 101, true},
		{"100:105:", 105, false}, // from xmax on: not finished
		{"100:105:", 200, false},
		// Across an epoch: xmax in epoch 1, xids of epoch 0 just below it.
		{"4294967290:4294967300:4294967295", 4294967295, false},
		{"4294967290:4294967300:4294967295", 4294967294, true},
		{"4294967290:4294967300:4294967295", 3, true},   // 2^32+3 < xmax
		{"4294967290:4294967300:4294967295", 10, false}, // 2^32+10 >= xmax
	}
	for _, c := range cases {
		s, err := parseSnapshot(c.snap)
		if err != nil {
			t.Fatalf("parse %q: %v", c.snap, err)
		}
		if got := s.visible(c.xid); got != c.want {
			t.Errorf("%q visible(%d) = %v, want %v", c.snap, c.xid, got, c.want)
		}
	}
	if got := widenXid(5, 3*wrap+10); got != 3*wrap+5 {
		t.Errorf("widenXid(5, 3*2^32+10) = %d", got)
	}
	if got := widenXid(4294967295, 3*wrap+10); got != 3*wrap-1 {
		t.Errorf("widenXid(2^32-1, 3*2^32+10) = %d, want the epoch before", got)
	}
	for _, bad := range []string{"", "1:2", "a:2:", "1:b:", "1:2:x"} {
		if _, err := parseSnapshot(bad); err == nil {
			t.Errorf("parseSnapshot(%q) accepted", bad)
		}
	}
}
