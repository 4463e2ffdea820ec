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
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/poll"
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
	// The test's plain producer keeps the time a record names: the DLT
	// records carry the times the test gives them.
	w := kafkatest.NewProducer(t, cfg.Brokers...)
	now := time.Now().Truncate(time.Millisecond)
	f.boundary = now.Add(-90 * time.Minute)
	// The originals first, on the main topic, where the DLT records say
	// they failed.
	type original struct {
		key, id string
		at      time.Time
	}
	var originals []original
	for i, k := range []string{"K1", "K1", "K2", "K1", "K3", "K4", "K5"} {
		at := now.Add(-2 * time.Hour)
		if i >= 3 {
			at = now.Add(-time.Hour)
		}
		originals = append(originals, original{key: k, id: fmt.Sprintf("ev-%s-%d", k, i), at: at})
	}
	for i, o := range originals[:5] {
		w.Plain(kafka.Message{Topic: f.main, Key: []byte(o.key), Value: value(i),
			Headers: []kafka.Header{{Key: events.HeaderEventID, Value: []byte(o.id)}}})
	}
	at := map[string]dlt.Record{}
	for _, r := range listDLT(t, cfg, dlt.Filter{Topic: f.main}) {
		at[r.EventID] = r
	}
	for i, o := range originals {
		hs := []broker.Header{
			{Key: events.HeaderEventID, Value: []byte(o.id)},
			{Key: events.HeaderEventType, Value: []byte(events.TypeAnalysed)},
			{Key: events.HeaderCorrelationID, Value: []byte("corr-" + o.id)},
		}
		origin := dlt.Origin{Topic: f.main, Partition: at[o.id].Partition, Offset: at[o.id].Offset, Timestamp: o.at, Group: "g"}
		switch o.key {
		case "K4": // forged: it never failed on the main topic
			origin.Partition, origin.Offset = 0, 999
		case "K5": // its header names another topic
			origin.Topic = "pagamentos.transferencia.analisada.v1"
		}
		hs = dlt.SetFailure(hs, origin, errors.New("boom: cannot handle"))
		w.Plain(kafkatest.Message(broker.Record{Topic: f.dlt, Key: []byte(o.key), Value: value(i), Time: o.at, Headers: hs}))
		if o.at.Before(f.boundary) {
			f.phase1 = append(f.phase1, o.id)
		} else {
			f.phase2 = append(f.phase2, o.id)
		}
	}
	return f
}

func value(i int) []byte { return []byte(`{"n":` + strconv.Itoa(i) + `}`) }

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
			"--offset", strconv.FormatInt(k3[0].Offset, 10), "--dry-run"},
			wantOut: []string{f.phase2[1], "target: " + f.main, "dry run: 1 record(s) would be replayed to " + f.main + " (0 unverified)"}},
		{name: "replay one", args: []string{"replay", "--topic", f.dlt, "--partition", strconv.Itoa(k3[0].Partition),
			"--offset", strconv.FormatInt(k3[0].Offset, 10), "--rate", "5"}, wantOut: []string{"replayed 1 of 1 record(s) to " + f.main + " (0 unverified)"}},
		{name: "replay forged dry run", args: []string{"replay", "--topic", f.dlt, "--key", "K4", "--dry-run"},
			wantOut: []string{"UNVERIFIED", "no record at " + f.main + "/0@999", "(1 unverified, refused without --unverified)"}},
		{name: "replay forged", args: []string{"replay", "--topic", f.dlt, "--key", "K4"}, wantErr: "pass --unverified"},
		{name: "replay forged unverified", args: []string{"replay", "--topic", f.dlt, "--key", "K4", "--unverified"},
			wantOut: []string{"replayed 1 of 1 record(s) to " + f.main + " (1 unverified, replayed with --unverified and marked " + dlt.HeaderUnverified + ")"}},
		{name: "replay origin elsewhere", args: []string{"replay", "--topic", f.dlt, "--key", "K5", "--unverified"},
			wantErr: "holds the dead letters of " + f.main + " only"},
		{name: "replay a DLT of no suite topic", args: []string{"replay", "--topic", "pagamentos.outra.v1-dlt", "--all"},
			wantErr: "not the dead-letter topic of a topic of the suite"},
		{name: "replay not a DLT", args: []string{"replay", "--topic", f.main, "--all"}, wantErr: "is not a dead-letter topic"},
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
			err := dltCommand(context.Background(), tt.args, getenv, &out, []string{f.main})
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
	// "replay forged unverified" put K4's there marked; K5 went nowhere.
	var k4 []dlt.Record
	for _, r := range listDLT(t, f.cfg, dlt.Filter{Topic: f.main, Key: "K4"}) {
		if (broker.Record{Headers: r.Headers}).Header(dlt.HeaderUnverified) == "" {
			t.Errorf("K4 replayed without the %s mark", dlt.HeaderUnverified)
		}
		k4 = append(k4, r)
	}
	if len(k4) != 1 {
		t.Errorf("main topic holds %d K4 records, want the one forced replay", len(k4))
	}
	if n := len(listDLT(t, f.cfg, dlt.Filter{Topic: f.main, Key: "K5"})); n != 0 {
		t.Errorf("main topic holds %d K5 records, want none: its replay was refused", n)
	}
}
