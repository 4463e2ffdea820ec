package broker

import (
	"context"
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Send failures fall in two kinds:
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
//
// The producer retries what Kafka calls retriable inside the client (no
// leader, not enough replicas, a lost connection) until the Publish call's
// context ends, so a broker that cannot be reached surfaces as the
// context's deadline.

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
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.MessageTooLarge, kerr.CorruptMessage, kerr.InvalidRecord, kerr.InvalidTimestamp,
			kerr.RecordListTooLarge, kerr.InvalidTopicException:
			return CauseRecordRefused
		case kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.GroupAuthorizationFailed,
			kerr.TransactionalIDAuthorizationFailed, kerr.DelegationTokenAuthorizationFailed,
			kerr.SaslAuthenticationFailed:
			return CauseAuthorization
		case kerr.UnknownTopicOrPartition, kerr.UnknownTopicID:
			return CauseUnknownTopic
		case kerr.UnknownServerError:
			return CauseUnknownServer
		case kerr.RequestTimedOut:
			return CauseTimeout
		default:
			return CauseBroker
		}
	}
	var nerr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return CauseTimeout
	case errors.As(err, &nerr):
		return CauseNetwork
	default:
		return CauseOther
	}
}

// sendError wraps the error of one record of a Publish call. Temporary
// tells pkg/outage which of the client's errors are an outage: Kafka's
// retriable codes and the client's own timeouts.
type sendError struct{ err error }

func (e sendError) Error() string { return e.err.Error() }
func (e sendError) Unwrap() error { return e.err }

// Temporary reports whether the same record would succeed later unchanged.
func (e sendError) Temporary() bool {
	return kerr.IsRetriable(e.err) || errors.Is(e.err, kgo.ErrRecordTimeout) || errors.Is(e.err, kgo.ErrRecordRetries)
}

// RecordError returns err, the Kafka error of one record, as Publish
// reports it among PublishErrors: Temporary tells pkg/outage which errors
// are an outage. A Publisher other than Producer (a test's fault injector)
// fails a record with it to fail it as the producer does.
func RecordError(err error) error { return sendError{err} }
