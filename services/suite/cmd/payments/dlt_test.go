package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/kafkatest"
	"github.com/paysuite/payments/test/poll"
)

// dltFixture is a main topic and its DLT holding five dead-lettered
// records: phase1 before boundary, phase2 after it.
type dltFixture struct {
	cfg            broker.Config
	main, dlt      string
	boundary       time.Time
	phase1, phase2 []string
}

func newDLTFixture(t *testing.T) *dltFixture {
	t.Helper()
	cfg := broker.Config{Brokers: kafkatest.Brokers(t)}
	f := &dltFixture{cfg: cfg}
	f.main = kafkatest.Topic(t, "payments.dlt.main", 2)
	f.dlt = events.DLT(f.main)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := broker.CreateTopics(ctx, cfg, []broker.TopicSpec{{Name: f.dlt, Partitions: 2, ReplicationFactor: 1}}); err != nil {
		t.Fatalf("create DLT: %v", err)
	}
	t.Cleanup(func() {
		c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second}
		_, _ = c.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{f.dlt}})
	})
	w := broker.NewWriter(cfg, 100)
	defer func() { _ = w.Close() }()
	now := time.Now().Truncate(time.Millisecond)
	f.boundary = now.Add(-90 * time.Minute)
	n := 0
	deadLetter := func(at time.Time, keys ...string) []string {
		var ids []string
		for _, k := range keys {
			id := fmt.Sprintf("ev-%s-%d", k, n)
			hs := []kafka.Header{
				{Key: events.HeaderEventID, Value: []byte(id)},
				{Key: events.HeaderEventType, Value: []byte(events.TypeAnalysed)},
				{Key: events.HeaderCorrelationID, Value: []byte("corr-" + id)},
			}
			hs = dlt.SetFailure(hs, dlt.Origin{Topic: f.main, Partition: 0, Offset: int64(n), Timestamp: at, Group: "g"},
				errors.New("boom: cannot handle"))
			m := kafka.Message{Topic: f.dlt, Key: []byte(k), Value: []byte(`{"n":` + strconv.Itoa(n) + `}`), Time: at, Headers: hs}
			if err := w.WriteMessages(ctx, m); err != nil {
				t.Fatalf("write to the DLT: %v", err)
			}
			ids = append(ids, id)
			n++
		}
		return ids
	}
	f.phase1 = deadLetter(now.Add(-2*time.Hour), "K1", "K1", "K2")
	f.phase2 = deadLetter(now.Add(-time.Hour), "K1", "K3")
	return f
}

func listDLT(t *testing.T, cfg broker.Config, f dlt.Filter) []dlt.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := dlt.List(ctx, cfg, f)
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	return recs
}

// TestDLTCommand runs "payments dlt" against a DLT holding records in two
// phases (an hour apart, boundary between them), written with the Spring
// headers the consumer loop writes.
func TestDLTCommand(t *testing.T) {
	t.Parallel()
	f := newDLTFixture(t)
	getenv := func(k string) string {
		if k == "KAFKA_BROKERS" {
			return strings.Join(f.cfg.Brokers, ",")
		}
		return ""
	}
	k3 := listDLT(t, f.cfg, dlt.Filter{Topic: f.dlt, Key: "K3"})
	if len(k3) != 1 {
		t.Fatalf("K3 has %d records on the DLT, want 1", len(k3))
	}
	tests := []struct {
		name    string
		args    []string
		wantOut []string
		wantErr string
	}{
		{name: "list by key", args: []string{"list", "--topic", f.dlt, "--key", "K3"},
			wantOut: []string{"PARTITION", "EVENT-ID", f.phase2[1], f.main + "/", "boom: cannot handle", "1 record(s)"}},
		{name: "list to", args: []string{"list", "--topic", f.dlt, "--to", f.boundary.Format(time.RFC3339Nano)},
			wantOut: []string{f.phase1[0], f.phase1[2], "3 record(s)"}},
		{name: "list json", args: []string{"list", "--topic", f.dlt, "--key", "K3", "--output", "json"},
			wantOut: []string{`"originTopic":"` + f.main + `"`, `"evento-id":"` + f.phase2[1] + `"`}},
		{name: "list help", args: []string{"list", "--help"}, wantOut: []string{"Usage: dlt list", "-topic", "-from"}},
		{name: "replay help", args: []string{"replay", "-h"}, wantOut: []string{"Usage: dlt replay", "-rate", "-offset"}},
		{name: "help", args: []string{"--help"}, wantOut: []string{"dlt list", "dlt replay"}},
		{name: "replay dry run", args: []string{"replay", "--topic", f.dlt, "--partition", strconv.Itoa(k3[0].Partition),
			"--offset", strconv.FormatInt(k3[0].Offset, 10), "--dry-run"}, wantOut: []string{f.phase2[1], "dry run: 1 record(s)"}},
		{name: "replay one", args: []string{"replay", "--topic", f.dlt, "--partition", strconv.Itoa(k3[0].Partition),
			"--offset", strconv.FormatInt(k3[0].Offset, 10), "--rate", "5"}, wantOut: []string{"replayed 1 of 1 record(s)"}},
		{name: "no command", args: nil, wantErr: "a command is required"},
		{name: "unknown command", args: []string{"purge"}, wantErr: "unknown command"},
		{name: "list without topic", args: []string{"list"}, wantErr: "--topic is required"},
		{name: "bad time", args: []string{"list", "--topic", f.dlt, "--from", "yesterday"}, wantErr: "RFC 3339"},
		{name: "from after to", args: []string{"list", "--topic", f.dlt, "--from", "1h", "--to", "2h"}, wantErr: "--from must be before --to"},
		{name: "replay without selection", args: []string{"replay", "--topic", f.dlt}, wantErr: "--all"},
		{name: "replay offset without partition", args: []string{"replay", "--topic", f.dlt, "--offset", "0"}, wantErr: "--partition"},
		{name: "replay nothing matches", args: []string{"replay", "--topic", f.dlt, "--key", "nobody"}, wantErr: "no record matches"},
		{name: "unknown topic", args: []string{"list", "--topic", f.dlt + "-nope"}, wantErr: "does not exist"},
		{name: "stray argument", args: []string{"list", "--topic", f.dlt, "extra"}, wantErr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := dltCommand(context.Background(), tt.args, getenv, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Command(%q) = %v, want an error mentioning %q\n%s", tt.args, err, tt.wantErr, out.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("Command(%q) = %v\n%s", tt.args, err, out.String())
			}
			for _, s := range tt.wantOut {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
	// "replay one" put K3's record back on the main topic.
	poll.Until(t, 30*time.Second, "K3 replayed to its topic", func() (bool, string) {
		for _, r := range listDLT(t, f.cfg, dlt.Filter{Topic: f.main, Key: "K3"}) {
			if r.ReplayedAt != "" && r.EventID == f.phase2[1] {
				return true, ""
			}
		}
		return false, "K3 not replayed"
	})
}
