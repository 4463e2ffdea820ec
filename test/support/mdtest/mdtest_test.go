package mdtest_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/test/support/mdtest"
)

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{" OutboxDeadEvents", "outboxdeadevents"},
		{" Logs: JSON, request_id and trace_id", "logs-json-request_id-and-trace_id"},
		{" `payments outbox requeue`", "payments-outbox-requeue"},
		{"The suite's own issuer", "the-suites-own-issuer"},
		{"Relay throughput and latency (`make bench`)", "relay-throughput-and-latency-make-bench"},
	}
	for _, tc := range tests {
		if got := mdtest.Slug(tc.in); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	text := "# Title\n\n## Usage\n\n```sh\n# not a heading\n```\n\n### Usage\n#nospace\n"
	want := map[string]bool{"title": true, "usage": true, "usage-1": true}
	if diff := cmp.Diff(want, mdtest.Anchors(text)); diff != "" {
		t.Errorf("Anchors mismatch (-want +got):\n%s", diff)
	}
}
