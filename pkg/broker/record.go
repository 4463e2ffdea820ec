package broker

import (
	"context"
	"strconv"
	"time"
)

// Record is the suite's Kafka record: what handlers take, what the outbox
// relay, the consumer loop and the DLT tooling publish, and what the
// operator tools list. Only this package converts it to and from a Kafka
// client's own type.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	// Time is the record's timestamp (read records; ignored on publish:
	// the producer stamps it).
	Time time.Time
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Header returns the value of r's last header named key, or "" without one.
func (r Record) Header(key string) string {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value)
		}
	}
	return ""
}

// SetHeader replaces (or adds) the header named key.
func SetHeader(hs []Header, key, value string) []Header {
	out := hs[:0:0]
	for _, h := range hs {
		if h.Key != key {
			out = append(out, h)
		}
	}
	return append(out, Header{Key: key, Value: []byte(value)})
}

// Publisher sends records to Kafka; *Producer (NewProducer,
// NewDLTProducer) is the production one. Publish returns nil when every
// record was acknowledged, or PublishErrors (aligned with recs) or another
// error. The outbox relay, the consumer loop (retry topics and DLTs) and the
// DLT replay all publish through it.
type Publisher interface {
	Publish(ctx context.Context, recs ...Record) error
}

// PublishErrors is Publish's error when it has one outcome per record: the
// error of recs[i] at i, nil for a record acknowledged.
type PublishErrors []error

func (e PublishErrors) Error() string {
	n := 0
	var first error
	for _, err := range e {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if first == nil {
		return "no record failed"
	}
	return strconv.Itoa(n) + " of " + strconv.Itoa(len(e)) + " records failed, the first: " + first.Error()
}
