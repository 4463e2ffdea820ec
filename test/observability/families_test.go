package observability

import (
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// family is a metric family as a service exposes it: its name, its type and
// the label names of its series.
type family struct {
	Name   string
	Type   dto.MetricType
	Labels []string
}

const (
	counter   = dto.MetricType_COUNTER
	gauge     = dto.MetricType_GAUGE
	histogram = dto.MetricType_HISTOGRAM
)

// The families every service exposes, registered by the pkg/platform pieces
// each service's run builds (NewRelay, NewReadiness, NewRouter).
var (
	outboxFamilies = []family{
		{"outbox_pending_events", gauge, nil},
		{"outbox_oldest_pending_age_seconds", gauge, nil},
		{"outbox_dead_events", gauge, nil},
		{"outbox_keys_held_back", gauge, nil},
		{"outbox_published_total", counter, []string{"topic", "type"}},
		{"outbox_send_failures_total", counter, []string{"cause"}},
		{"outbox_dead_total", counter, nil},
		{"outbox_enqueue_to_ack_seconds", histogram, nil},
		{"outbox_relay_batch_size", histogram, nil},
		{"outbox_relay_batch_duration_seconds", histogram, nil},
		{"outbox_relay_empty_claims_total", counter, nil},
		{"outbox_logical_active", gauge, nil},
		{"outbox_logical_slot_lag_bytes", gauge, nil},
		{"outbox_logical_lag_seconds", gauge, nil},
		{"outbox_logical_slot_left_behind", gauge, nil},
		{"outbox_logical_held_back_total", counter, nil},
		{"outbox_logical_settled_total", counter, nil},
		{"outbox_logical_slots_created_total", counter, nil},
		{"outbox_logical_synchronous_candidate", gauge, nil},
	}
	consumerFamilies = []family{
		{"consumer_records_total", counter, []string{"group", "outcome", "topic"}},
		{"consumer_handler_duration_seconds", histogram, []string{"group", "topic"}},
		{"consumer_retries_total", counter, []string{"attempt", "group"}},
		{"consumer_dlt_records_total", counter, []string{"origin_topic"}},
		{"consumer_lag", gauge, []string{"group", "partition", "topic"}},
		{"consumer_batch_size", histogram, nil},
		{"consumer_dependency_waits_total", counter, []string{"group"}},
		{"consumer_dependency_waiting", gauge, []string{"group"}},
		{"consumer_commit_failures_total", counter, []string{"group", "reason"}},
	}
	httpFamilies = []family{
		{"http_requests_total", counter, []string{"method", "route", "status"}},
		{"http_request_duration_seconds", histogram, []string{"method", "route"}},
		{"auth_requests_refused_total", counter, []string{"reason"}},
		{"auth_token_cache_entries", gauge, nil},
		{"auth_token_cache_hits_total", counter, nil},
		{"auth_token_cache_misses_total", counter, nil},
		{"auth_token_cache_flushes_total", counter, nil},
	}
)

// serviceFamilies are each service's own families. inbox_duplicates_total is
// the transfers projection's (services/transfers/internal/postgres); the others
// deduplicate in their own tables and count it in their own families (antifraud_duplicate_requests_total,
// ledger_settlements_total{result="DUPLICADA"},
// notifications_sends_total{outcome="duplicate"}).
var serviceFamilies = map[string][]family{
	"transfers": {
		{"transfers_idempotent_replays_total", counter, nil},
		{"transfers_idempotency_conflicts_total", counter, []string{"reason"}},
		{"inbox_duplicates_total", counter, []string{"consumer"}},
		{"transfers_results_held_total", counter, nil},
		{"transfers_results_held", gauge, nil},
		{"transfers_results_held_overdue", gauge, nil},
		{"transfers_results_reapplied_total", counter, nil},
		{"transfers_admission_shed_total", counter, nil},
		{"transfers_admission_shedding", gauge, nil},
	},
	"ledger": {
		{"ledger_settlements_total", counter, []string{"reason", "result"}},
		{"ledger_settlement_batch_size", histogram, nil},
		{"ledger_dlt_messages_total", counter, []string{"origin_topic"}},
	},
	"antifraud": {
		{"antifraud_decisions_total", counter, []string{"outcome"}},
		{"antifraud_rules_fired_total", counter, []string{"rule"}},
		{"antifraud_duplicate_requests_total", counter, nil},
	},
	"notifications": {
		{"notifications_sends_total", counter, []string{"channel", "outcome"}},
		{"notifications_send_duration_seconds", histogram, []string{"channel"}},
	},
}

// serviceNames are the four services, in the order of CONTRACTS.md section 0.
var serviceNames = []string{"transfers", "ledger", "antifraud", "notifications"}

// expectedFamilies returns the families service must expose once it has
// seen traffic.
func expectedFamilies(service string) []family {
	out := slices.Concat(outboxFamilies, consumerFamilies, httpFamilies, serviceFamilies[service])
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// knownFamilies maps every family name a service exposes (proved by
// TestMetricFamilies) to its family. Alerts and dashboards may use only
// these.
func knownFamilies() map[string]family {
	out := map[string]family{}
	for _, s := range serviceNames {
		for _, f := range expectedFamilies(s) {
			out[f.Name] = f
		}
	}
	return out
}

// prometheusSynthesized are series Prometheus itself adds for every scrape
// target; rules may use them although no service exposes them.
var prometheusSynthesized = map[string][]string{
	"up": nil,
}

// targetLabels are added by Prometheus to every series of a target.
var targetLabels = []string{"job", "instance"}

// familyOf returns the family a series name belongs to: a histogram's
// _bucket, _sum and _count series belong to the histogram.
func familyOf(known map[string]family, series string) (family, bool) {
	if f, ok := known[series]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(series, suffix)
		if !ok {
			continue
		}
		if f, ok := known[base]; ok && f.Type == histogram {
			if suffix == "_bucket" {
				f.Labels = append(slices.Clone(f.Labels), "le")
			}
			return f, true
		}
	}
	if labels, ok := prometheusSynthesized[series]; ok {
		return family{Name: series, Type: gauge, Labels: labels}, true
	}
	return family{}, false
}
