package dlt

import (
	"encoding/binary"
	"errors"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/broker"
)

// This file is the Spring Kafka dead-letter header format, written once: the
// consumer loop writes it when it forwards a record to a retry topic or a
// DLT, and List, the ledger's DLT monitor and the notifications' handler read
// it.

// Header names of dead-letter and retry records, as Spring Kafka writes them,
// so that Spring tooling and consumers understand our DLTs.
const (
	HeaderDLTOriginalTopic     = "kafka_dlt-original-topic"
	HeaderDLTOriginalPartition = "kafka_dlt-original-partition"
	HeaderDLTOriginalOffset    = "kafka_dlt-original-offset"
	HeaderDLTOriginalTimestamp = "kafka_dlt-original-timestamp"
	HeaderDLTOriginalGroup     = "kafka_dlt-original-consumer-group"
	HeaderDLTExceptionFQCN     = "kafka_dlt-exception-fqcn"
	HeaderDLTExceptionMessage  = "kafka_dlt-exception-message"
	HeaderRetryAttempts        = "retry_topic-attempts"
	HeaderRetryBackoffUntil    = "retry_topic-backoff-timestamp"
	// HeaderReplayed marks a record replayed from a DLT by an operator.
	HeaderReplayed = "dlt-replayed-at"
)

// Origin is where a dead-lettered or retried record first came from.
type Origin struct {
	Topic     string
	Partition int
	Offset    int64
	Timestamp time.Time
	Group     string
}

// ClaimedOrigin returns the origin that m's kafka_dlt-original-* headers
// name; ok is false when m has no kafka_dlt-original-topic header. The
// headers are whatever the record's writer put there: a reader shows them
// and checks them against facts (Prepare), never routes by them.
func ClaimedOrigin(m broker.Record) (o Origin, ok bool) {
	t := m.Header(HeaderDLTOriginalTopic)
	if t == "" {
		return Origin{}, false
	}
	o = Origin{Topic: t, Group: m.Header(HeaderDLTOriginalGroup)}
	o.Partition = int(decodeInt(rawHeader(m, HeaderDLTOriginalPartition)))
	o.Offset = decodeInt(rawHeader(m, HeaderDLTOriginalOffset))
	o.Timestamp = time.UnixMilli(decodeInt(rawHeader(m, HeaderDLTOriginalTimestamp)))
	return o, true
}

// OriginOf returns where m, consumed by group for the main topic main,
// first came from. A record read from main itself is its own origin,
// whatever its headers say. A record read from another topic (a retry
// topic of main) has main as its origin topic, whatever its headers say,
// and the partition, offset and time its origin headers name, which the
// consumer loop wrote when it moved the record there; without them the
// offset is -1 (unknown), which no replay check accepts.
func OriginOf(m broker.Record, main, group string) Origin {
	if m.Topic == main {
		return Origin{Topic: main, Partition: int(m.Partition), Offset: m.Offset, Timestamp: m.Time, Group: group}
	}
	o, ok := ClaimedOrigin(m)
	if !ok {
		return Origin{Topic: main, Partition: int(m.Partition), Offset: -1, Timestamp: m.Time, Group: group}
	}
	o.Topic, o.Group = main, group
	return o
}

// WithoutFailure returns a copy of headers without the dead-letter and
// retry bookkeeping (kafka_dlt-*, kafka_exception-* and retry_topic-*
// headers): what a record's writer put there never reaches the next hop,
// which gets the headers of facts (SetFailure, SetRetry) instead.
func WithoutFailure(headers []broker.Header) []broker.Header {
	out := make([]broker.Header, 0, len(headers))
	for _, h := range headers {
		if !failureHeader(h.Key) {
			out = append(out, h)
		}
	}
	return out
}

func failureHeader(key string) bool {
	return strings.HasPrefix(key, "kafka_dlt-") || strings.HasPrefix(key, "retry_topic-") ||
		strings.HasPrefix(key, "kafka_exception-")
}

// Attempts returns the delivery attempt m represents: 1 on the main topic,
// then the retry_topic-attempts header.
func Attempts(m broker.Record) int {
	if v := rawHeader(m, HeaderRetryAttempts); v != nil {
		if n := int(decodeInt(v)); n > 0 {
			return n
		}
	}
	return 1
}

// DueAt returns the time before which a retry record must not be processed,
// or the zero time.
func DueAt(m broker.Record) time.Time {
	v := rawHeader(m, HeaderRetryBackoffUntil)
	if len(v) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(new(big.Int).SetBytes(v).Int64())
}

// ExceptionMessage returns the failure recorded on a DLT record.
func ExceptionMessage(m broker.Record) string { return m.Header(HeaderDLTExceptionMessage) }

// maxExceptionMessage bounds the kafka_dlt-exception-message header.
const maxExceptionMessage = 4000

// SetFailure sets on headers the origin and exception headers of a record
// forwarded to a retry topic or a DLT because of cause, replacing any it
// had, and returns the headers.
func SetFailure(headers []broker.Header, origin Origin, cause error) []broker.Header {
	msg := cause.Error()
	if len(msg) > maxExceptionMessage {
		msg = msg[:maxExceptionMessage]
	}
	headers = set(headers, HeaderDLTOriginalTopic, []byte(origin.Topic))
	headers = set(headers, HeaderDLTOriginalPartition, encodeInt32(origin.Partition))
	headers = set(headers, HeaderDLTOriginalOffset, encodeInt64(origin.Offset))
	headers = set(headers, HeaderDLTOriginalTimestamp, encodeInt64(origin.Timestamp.UnixMilli()))
	headers = set(headers, HeaderDLTOriginalGroup, []byte(origin.Group))
	headers = set(headers, HeaderDLTExceptionFQCN, []byte(errorType(cause)))
	return set(headers, HeaderDLTExceptionMessage, []byte(msg))
}

// SetRetry sets on headers the retry-topic headers: the delivery attempt the
// record will be and the time before which it must not be handled.
func SetRetry(headers []broker.Header, attempt int, due time.Time) []broker.Header {
	headers = SetAttempts(headers, attempt)
	return set(headers, HeaderRetryBackoffUntil, encodeBigInt(due.UnixMilli()))
}

// SetAttempts sets on headers the retry_topic-attempts header: how many
// deliveries a record has had (a DLT record from the last retry topic
// says how many it was given before it was dead-lettered).
func SetAttempts(headers []broker.Header, attempts int) []broker.Header {
	return set(headers, HeaderRetryAttempts, encodeInt32(attempts))
}

// set replaces the headers named key with one of value v.
func set(headers []broker.Header, key string, v []byte) []broker.Header {
	headers = broker.SetHeader(headers, key, "")
	headers[len(headers)-1].Value = v
	return headers
}

func rawHeader(m broker.Record, key string) []byte {
	for i := len(m.Headers) - 1; i >= 0; i-- {
		if m.Headers[i].Key == key {
			return m.Headers[i].Value
		}
	}
	return nil
}

// Spring writes partitions and attempts as 4-byte big-endian ints, offsets
// and timestamps as 8-byte longs; decimal text is accepted too.
func encodeInt32(v int) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(int32(v))) //nolint:gosec // partitions and attempts fit in int32
	return b
}

func encodeInt64(v int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(v)) //nolint:gosec // two's complement, as Java writes a long
	return b
}

// encodeBigInt writes v as Java's BigInteger.toByteArray does for positive
// values, which is how Spring writes retry_topic-backoff-timestamp.
func encodeBigInt(v int64) []byte {
	b := big.NewInt(v).Bytes()
	if len(b) > 0 && b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	return b
}

func decodeInt(b []byte) int64 {
	switch len(b) {
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b))) //nolint:gosec // Java int
	case 8:
		return int64(binary.BigEndian.Uint64(b)) //nolint:gosec // Java long
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// errorType names the innermost error's Go type, the analogue of Spring's
// exception class name.
func errorType(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	return typeName(err)
}

func typeName(err error) string {
	t := reflect.TypeOf(err)
	if t == nil {
		return "<nil>"
	}
	return t.String()
}
