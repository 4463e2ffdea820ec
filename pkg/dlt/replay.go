package dlt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
)

// This file is the replay of dead-letter records. Where a record goes is a
// fact of the DLT it sits on, never a header: a record of <topic>-dlt goes
// back to <topic>, for the main topics the suite knows, and nowhere else.
// Whoever may write a DLT (several principals may) can put any record
// there with any headers, so before anything is published each record is
// checked against its original: the partition and offset its origin
// headers name on the main topic must hold a record with the same key and
// value. A record that fails the check is replayed only when the operator
// says so explicitly (Options.Unverified), and then it carries
// HeaderUnverified.

// Replay errors.
var (
	// ErrRefused is a replay the rule forbids whatever the operator says:
	// a DLT the suite does not know, or a record whose origin header
	// names another topic than the DLT's main topic. A conflict, whose
	// client is told the whole error: it says what was refused.
	ErrRefused = &errkind.Error{Kind: errkind.Conflict, Detail: "dlt: replay refused", Whole: true}
	// ErrUnverified is a replay of records that do not match a record of
	// their main topic, asked for without Options.Unverified.
	ErrUnverified = errors.New("dlt: records not verified against their original")
)

// HeaderUnverified marks a record replayed although it matched no
// original (Options.Unverified); its value says why it did not.
const HeaderUnverified = "dlt-replay-unverified"

// MainTopic returns the topic a replay from dltTopic goes to: its main
// topic by the naming rule (events.MainOfDLT), when that is one of known
// (the suite's main topics, as configured). Otherwise it returns an error
// wrapping ErrRefused.
func MainTopic(dltTopic string, known []string) (string, error) {
	main, ok := events.MainOfDLT(dltTopic)
	if !ok {
		return "", fmt.Errorf("%w: %s is not a dead-letter topic (<topic>%s)", ErrRefused, dltTopic, events.DLTSuffix)
	}
	if !slices.Contains(known, main) {
		return "", fmt.Errorf("%w: %s is not the dead-letter topic of a topic of the suite", ErrRefused, dltTopic)
	}
	return main, nil
}

// Check is one record of a Plan and the result of its check.
type Check struct {
	Record Record
	// Verified says that the record's claimed origin (Record.Origin) on
	// the plan's target holds a record with the same key and value.
	Verified bool
	// Problem says why the record is not verified.
	Problem string
}

// Plan is a checked replay: the records of DLT, each to go to Target.
type Plan struct {
	DLT, Target string
	Checks      []Check
}

// Unverified returns how many records of p did not pass their check.
func (p Plan) Unverified() int {
	n := 0
	for _, c := range p.Checks {
		if !c.Verified {
			n++
		}
	}
	return n
}

// Prepare checks recs, records List read from dltTopic, for a replay to
// the DLT's main topic (MainTopic of known). A record whose origin header
// names another topic than that refuses the whole replay (ErrRefused);
// so does a DLT the suite does not know. Each record is then looked up at
// the partition and offset its origin headers name on the main topic
// (read_committed, without a consumer group): it is verified when that
// offset still holds a record with the same key and value. A record
// without origin headers, or whose original is gone (past the topic's
// retention) or differs, is not verified, and Replay refuses it unless
// told otherwise. It fails when the main topic cannot be read.
func Prepare(ctx context.Context, cfg broker.Config, dltTopic string, known []string, recs []Record) (Plan, error) {
	target, err := MainTopic(dltTopic, known)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{DLT: dltTopic, Target: target, Checks: make([]Check, len(recs))}
	want := map[int32][]int64{} // the originals to read, by partition
	for i, r := range recs {
		if err := claims(r, dltTopic, target); err != nil {
			return Plan{}, err
		}
		p.Checks[i] = Check{Record: r}
		switch {
		case r.Origin.Topic == "":
			p.Checks[i].Problem = "no " + HeaderDLTOriginalTopic + " header: nothing to check it against"
		case r.Origin.Partition < 0 || r.Origin.Offset < 0:
			p.Checks[i].Problem = "its origin headers name no offset"
		default:
			pt := int32(r.Origin.Partition) //nolint:gosec // a partition number
			want[pt] = append(want[pt], r.Origin.Offset)
		}
	}
	originals, err := readAt(ctx, cfg, target, want)
	if err != nil {
		return Plan{}, err
	}
	for i := range p.Checks {
		c := &p.Checks[i]
		if c.Problem != "" {
			continue
		}
		at := fmt.Sprintf("%s/%d@%d", target, c.Record.Origin.Partition, c.Record.Origin.Offset)
		o, ok := originals[position{int32(c.Record.Origin.Partition), c.Record.Origin.Offset}] //nolint:gosec // a partition number
		switch {
		case !ok:
			c.Problem = "no record at " + at + " (never written there, or past the topic's retention)"
		case !bytes.Equal(o.Key, c.Record.Key) || !bytes.Equal(o.Value, c.Record.Value):
			c.Problem = "the record at " + at + " has another key or value"
		default:
			c.Verified = true
		}
	}
	return p, nil
}

// claims refuses a record that is not of dltTopic or whose origin header
// names another topic than target.
func claims(r Record, dltTopic, target string) error {
	if r.Topic != dltTopic {
		return fmt.Errorf("%w: %s/%d@%d is not a record of %s", ErrRefused, r.Topic, r.Partition, r.Offset, dltTopic)
	}
	if r.Origin.Topic != "" && r.Origin.Topic != target {
		return fmt.Errorf("%w: %s/%d@%d names %s as its origin, but %s holds the dead letters of %s only",
			ErrRefused, r.Topic, r.Partition, r.Offset, strconv.Quote(r.Origin.Topic), dltTopic, target)
	}
	return nil
}

type position struct {
	partition int32
	offset    int64
}

// maxGap is the widest run of offsets read in one pass: offsets further
// apart are read separately rather than everything between them.
const maxGap = 1000

// readAt reads the records at the given offsets of topic, the ones that
// exist (a record past retention, compacted away, of an aborted
// transaction, or never written is absent from the result).
func readAt(ctx context.Context, cfg broker.Config, topic string, offsets map[int32][]int64) (map[position]Record, error) {
	out := map[position]Record{}
	for p, offs := range offsets {
		slices.Sort(offs)
		offs = slices.Compact(offs)
		for len(offs) > 0 {
			n := 1
			for n < len(offs) && offs[n]-offs[n-1] <= maxGap {
				n++
			}
			recs, err := List(ctx, cfg, Filter{Topic: topic, Partitions: []int{int(p)}, Offsets: offs[:n]})
			if err != nil {
				return nil, fmt.Errorf("dlt: read the originals on %s: %w", topic, err)
			}
			for _, r := range recs {
				out[position{int32(r.Partition), r.Offset}] = r //nolint:gosec // a partition number
			}
			offs = offs[n:]
		}
	}
	return out, nil
}

// replayedHeader reports whether a header is dropped on replay: the
// dead-letter and retry bookkeeping of the failed attempts, and the marks
// of an earlier replay.
func replayedHeader(key string) bool {
	return failureHeader(key) || key == HeaderReplayed || key == HeaderUnverified
}

// ReplayRecord is the record Replay publishes for c to target: c's key
// and value, with its headers (without the kafka_dlt-*, kafka_exception-*
// and retry_topic-* ones, and without earlier replay marks) plus the
// replay marker, and HeaderUnverified when c is not verified. It names no
// partition: the producer partitions it by its key, as the original was.
func ReplayRecord(c Check, target string, at time.Time) broker.Record {
	r := c.Record
	m := broker.Record{Topic: target, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		if !replayedHeader(h.Key) {
			m.Headers = append(m.Headers, broker.Header{Key: h.Key, Value: h.Value})
		}
	}
	m.Headers = append(m.Headers, broker.Header{Key: HeaderReplayed, Value: []byte(at.UTC().Format(time.RFC3339Nano))})
	if !c.Verified {
		m.Headers = append(m.Headers, broker.Header{Key: HeaderUnverified, Value: []byte(c.Problem)})
	}
	return m
}

// Options tune Replay.
type Options struct {
	// Rate bounds the records published per second (<= 0: no bound).
	Rate float64
	// Unverified publishes the plan's unverified records too, each with
	// HeaderUnverified; without it a plan with any unverified record is
	// refused (ErrUnverified) and nothing is published.
	Unverified bool
}

// Replay publishes the records of p, in order, each to p.Target (see
// ReplayRecord), waiting for each acknowledgement. A nil pub uses a
// producer of cfg (broker.NewProducer), closed before returning. It returns
// how many records were published; it stops at the first failure. The
// whole plan is checked before the first record is sent: its target must
// be its DLT's main topic by the naming rule and no record may name
// another origin (ErrRefused), and unverified records need
// opts.Unverified (ErrUnverified).
func Replay(ctx context.Context, cfg broker.Config, pub broker.Publisher, p Plan, opts Options) (int, error) {
	if main, ok := events.MainOfDLT(p.DLT); !ok || main != p.Target {
		return 0, fmt.Errorf("%w: %s does not hold the dead letters of %s", ErrRefused, p.DLT, p.Target)
	}
	for _, c := range p.Checks {
		if err := claims(c.Record, p.DLT, p.Target); err != nil {
			return 0, err
		}
	}
	if n := p.Unverified(); n > 0 && !opts.Unverified {
		return 0, fmt.Errorf("%w: %d of %d record(s) of %s match no record of %s", ErrUnverified, n, len(p.Checks), p.DLT, p.Target)
	}
	if pub == nil {
		prod, err := broker.NewProducer(cfg)
		if err != nil {
			return 0, fmt.Errorf("dlt: %w", err)
		}
		defer func() { _ = prod.Close() }() // every record was acknowledged
		pub = prod
	}
	var tick <-chan time.Time
	if opts.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / opts.Rate))
		defer t.Stop()
		tick = t.C
	}
	for i, c := range p.Checks {
		if i > 0 && tick != nil {
			select {
			case <-ctx.Done():
				return i, ctx.Err()
			case <-tick:
			}
		}
		m := ReplayRecord(c, p.Target, time.Now())
		if err := pub.Publish(ctx, m); err != nil {
			r := c.Record
			return i, fmt.Errorf("dlt: replay %s/%d@%d to %s: %w", r.Topic, r.Partition, r.Offset, m.Topic, err)
		}
	}
	return len(p.Checks), nil
}
