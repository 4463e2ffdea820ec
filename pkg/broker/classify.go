package broker

import (
	"context"
	"errors"
	"net"

	"github.com/segmentio/kafka-go"
)

// Send failures (kafka-go write errors) fall in two kinds:
//
//   - a refusal: the broker refused the record itself, and would refuse it
//     again however long we wait (too large, corrupt, invalid, a topic name
//     Kafka cannot hold). In the outbox relay only refusals count toward
//     DEAD (the refusals column, compared with MaxAttempts); a refused event
//     is sent alone from then on so that it cannot fail its neighbours.
//   - everything else is transient: the path to the broker, or the broker's
//     state, not the record (unreachable, no leader, not enough replicas,
//     timeouts), and also errors an operator must fix but that say nothing
//     against the record: authorization failures, an unknown topic (not
//     created yet, or deleted), the broker's "unknown server error". These
//     are retried by the outbox relay without limit with its backoff,
//     counted in outbox_send_failures_total{cause} and alerted on
//     (deploy/prometheus/alerts.yml): a whole backlog must never die of a
//     missing ACL or a broker restart. Those that say the broker could not
//     be reached (pkg/outage.Unavailable) are due again as soon as the broker
//     takes a send (pkg/outbox, waiting.go).

// Send failure causes, the values of outbox_send_failures_total's label.
// The set is closed: every series exists at 0 from start.
const (
	CauseRecordRefused = "record_refused"
	CauseAuthorization = "authorization"
	CauseUnknownTopic  = "unknown_topic"
	CauseUnknownServer = "unknown_server"
	CauseBroker        = "broker"
	CauseNetwork       = "network"
	CauseTimeout       = "timeout"
	CauseOther         = "other"
)

// Causes lists every cause label value.
var Causes = []string{CauseRecordRefused, CauseAuthorization, CauseUnknownTopic, CauseUnknownServer,
	CauseBroker, CauseNetwork, CauseTimeout, CauseOther}

// Refused reports whether err means the broker refused the record itself
// (see the kinds above); in the outbox such failures count toward DEAD.
func Refused(err error) bool { return Cause(err) == CauseRecordRefused }

// Cause is the bounded label of a send failure.
func Cause(err error) string {
	var tooLarge kafka.MessageTooLargeError
	if errors.As(err, &tooLarge) {
		return CauseRecordRefused
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		switch kerr {
		case kafka.MessageSizeTooLarge, kafka.InvalidMessage, kafka.InvalidMessageSize, kafka.InvalidRecord,
			kafka.InvalidTimestamp, kafka.RecordListTooLarge, kafka.InvalidTopic:
			return CauseRecordRefused
		case kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed, kafka.GroupAuthorizationFailed,
			kafka.TransactionalIDAuthorizationFailed, kafka.BrokerAuthorizationFailed,
			kafka.DelegationTokenAuthorizationFailed, kafka.SASLAuthenticationFailed:
			return CauseAuthorization
		case kafka.UnknownTopicOrPartition, kafka.UnknownTopicID:
			return CauseUnknownTopic
		case kafka.Unknown:
			return CauseUnknownServer
		case kafka.RequestTimedOut:
			return CauseTimeout
		default:
			return CauseBroker
		}
	}
	var nerr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CauseTimeout
	case errors.As(err, &nerr):
		return CauseNetwork
	default:
		return CauseOther
	}
}
