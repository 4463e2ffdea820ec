package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
)

const dltUsage = `Inspect and replay dead-letter topics (DLTs).

Usage:
  dlt list   --topic <dlt> [filters]        list dead-lettered records
  dlt replay --topic <dlt> <selection>      re-publish records to the DLT's main topic

Run "dlt <command> --help" for the flags of a command. The brokers come from
--brokers or KAFKA_BROKERS (default ` + broker.DefaultAddr + `).
`

// dltCommand is "payments dlt list|replay", the operators' DLT tooling on
// pkg/dlt: args are what follows "dlt" (list or replay and their flags),
// stdout receives tables and help, getenv reads KAFKA_BROKERS and the Kafka
// security settings, mains are the suite's main topics (a replay goes from
// <topic>-dlt to <topic> for these only). It returns an error (a non-zero
// exit) on bad flags, a refusal or a failure; --help is not a failure.
func dltCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, mains []string) error {
	if len(args) == 0 {
		_, _ = io.WriteString(stdout, dltUsage)
		return errors.New("dlt: a command is required: list or replay")
	}
	switch args[0] {
	case "list":
		return listCommand(ctx, args[1:], stdout, getenv)
	case "replay":
		return replayCommand(ctx, args[1:], stdout, getenv, mains)
	case "help", "-h", "-help", "--help":
		_, _ = io.WriteString(stdout, dltUsage)
		return nil
	default:
		_, _ = io.WriteString(stdout, dltUsage)
		return fmt.Errorf("dlt: unknown command %q", args[0])
	}
}

// selection are the flags list and replay share.
type selection struct {
	brokers    string
	topic      string
	from, to   timeFlag
	key        string
	partitions intList
	offsets    int64List
	limit      int
	timeout    time.Duration
}

func (s *selection) register(fs *flag.FlagSet, getenv func(string) string, defaultLimit int) {
	brokers := getenv("KAFKA_BROKERS")
	if brokers == "" {
		brokers = broker.DefaultAddr
	}
	fs.StringVar(&s.brokers, "brokers", brokers, "comma-separated Kafka brokers (default from KAFKA_BROKERS)")
	fs.StringVar(&s.topic, "topic", "", "the DLT to read, e.g. pagamentos.transferencia.liquidada.v1-dlt (required)")
	fs.Var(&s.from, "from", "only records dead-lettered at or after this time: RFC 3339 (2026-11-29T22:00:00Z), a date, or a duration ago (90m)")
	fs.Var(&s.to, "to", "only records dead-lettered before this time (same forms as --from)")
	fs.StringVar(&s.key, "key", "", "only records with this key (the source account)")
	fs.Var(&s.partitions, "partition", "only these partitions (comma-separated)")
	fs.Var(&s.offsets, "offset", "only these offsets (comma-separated; needs --partition when the topic has several)")
	fs.IntVar(&s.limit, "limit", defaultLimit, "at most this many records, the oldest first (0: no limit)")
	fs.DurationVar(&s.timeout, "timeout", 2*time.Minute, "give up after this long")
}

func (s *selection) filter() (dlt.Filter, error) {
	if s.topic == "" {
		return dlt.Filter{}, errors.New("--topic is required")
	}
	if s.limit < 0 {
		return dlt.Filter{}, errors.New("--limit must not be negative")
	}
	f := dlt.Filter{Topic: s.topic, From: s.from.t, To: s.to.t, Key: s.key,
		Partitions: s.partitions, Offsets: s.offsets, Limit: s.limit}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return dlt.Filter{}, errors.New("--from must be before --to")
	}
	return f, nil
}

func (s *selection) brokerConfig(getenv func(string) string) (broker.Config, error) {
	b := broker.ParseBrokers(s.brokers)
	if len(b) == 0 {
		return broker.Config{}, errors.New("no brokers: set --brokers or KAFKA_BROKERS")
	}
	sec, err := broker.SecurityFromEnv(getenv)
	if err != nil {
		return broker.Config{}, err
	}
	return broker.Config{Brokers: b, Security: sec}, nil
}

func newFlagSet(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(stdout, "%s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseDLTFlags parses args; help reports --help (not an error).
func parseDLTFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, fmt.Errorf("dlt %s: %w", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("dlt %s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return false, nil
}

func listCommand(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := newFlagSet("list", "Usage: dlt list --topic <dlt> [--from T] [--to T] [--key K] [--partition P] [--offset O] [--limit N] [--output table|json]\n\n"+
		"Lists the records of a dead-letter topic, oldest first, with where they came from and why they failed.\n"+
		"It reads the partitions directly: no consumer group, nothing committed.", stdout)
	var sel selection
	sel.register(fs, getenv, 100)
	output := fs.String("output", "table", "table or json")
	if help, err := parseDLTFlags(fs, args); help || err != nil {
		return err
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("dlt list: --output must be table or json, not %q", *output)
	}
	f, err := sel.filter()
	if err != nil {
		return fmt.Errorf("dlt list: %w", err)
	}
	cfg, err := sel.brokerConfig(getenv)
	if err != nil {
		return fmt.Errorf("dlt list: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, sel.timeout)
	defer cancel()
	recs, err := dlt.List(ctx, cfg, f)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(stdout, recs)
	}
	if err := writeTable(stdout, recs); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%d record(s)\n", len(recs))
	return err
}

// writeTable prints records as an aligned table.
func writeTable(w io.Writer, recs []dlt.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// tabwriter buffers; Flush reports any write error.
	_, _ = fmt.Fprintln(tw, "PARTITION\tOFFSET\tDEAD-LETTERED\tKEY\tEVENT-ID\tEVENT-TYPE\tORIGIN\tATTEMPTS\tEXCEPTION\tMESSAGE")
	for _, r := range recs {
		origin := "-"
		if r.Origin.Topic != "" {
			origin = printable(r.Origin.Topic) + "/" + strconv.Itoa(r.Origin.Partition) + "@" + strconv.FormatInt(r.Origin.Offset, 10)
		}
		_, _ = fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n",
			r.Partition, r.Offset, r.Time.UTC().Format(time.RFC3339), cell(string(r.Key), 32),
			cell(r.EventID, 36), cell(r.EventType, 32), origin, r.Attempts, cell(r.ExceptionType, 40),
			cell(r.ExceptionMessage, 80))
	}
	return tw.Flush()
}

// cell makes a value fit one table cell: printable (no tabs, newlines,
// control or bidirectional characters), at most n runes, "-" when empty.
func cell(s string, n int) string {
	if s == "" {
		return "-"
	}
	s = printable(s)
	if utf8.RuneCountInString(s) > n {
		rs := []rune(s)
		s = string(rs[:n-1]) + "…"
	}
	return s
}

type jsonRecord struct {
	Topic            string            `json:"topic"`
	Partition        int               `json:"partition"`
	Offset           int64             `json:"offset"`
	Time             time.Time         `json:"time"`
	Key              string            `json:"key"`
	Value            string            `json:"value"`
	Headers          map[string]string `json:"headers"`
	OriginTopic      string            `json:"originTopic,omitempty"`
	OriginPartition  int               `json:"originPartition"`
	OriginOffset     int64             `json:"originOffset"`
	OriginTime       time.Time         `json:"originTime,omitzero"`
	OriginGroup      string            `json:"originGroup,omitempty"`
	ExceptionType    string            `json:"exceptionType,omitempty"`
	ExceptionMessage string            `json:"exceptionMessage,omitempty"`
	Attempts         int               `json:"attempts"`
}

// writeJSON prints records as JSON lines, their unsafe characters escaped
// (escapeJSONControls).
func writeJSON(w io.Writer, recs []dlt.Record) error {
	for _, r := range recs {
		headers := map[string]string{}
		for _, h := range r.Headers {
			if utf8.Valid(h.Value) {
				headers[h.Key] = string(h.Value)
			} else {
				headers[h.Key] = fmt.Sprintf("0x%x", h.Value)
			}
		}
		line, err := json.Marshal(jsonRecord{
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Time: r.Time.UTC(),
			Key: string(r.Key), Value: string(r.Value), Headers: headers,
			OriginTopic: r.Origin.Topic, OriginPartition: r.Origin.Partition, OriginOffset: r.Origin.Offset,
			OriginTime: r.Origin.Timestamp.UTC(), OriginGroup: r.Origin.Group,
			ExceptionType: r.ExceptionType, ExceptionMessage: r.ExceptionMessage, Attempts: r.Attempts,
		})
		if err != nil {
			return err
		}
		if _, err := w.Write(append(escapeJSONControls(line), '\n')); err != nil {
			return err
		}
	}
	return nil
}

// timeFlag parses RFC 3339 times, dates, and durations ago.
type timeFlag struct {
	t   time.Time
	now func() time.Time
}

func (f *timeFlag) String() string {
	if f == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	now := time.Now
	if f.now != nil {
		now = f.now
	}
	t, err := parseTime(s, now())
	if err != nil {
		return err
	}
	f.t = t
	return nil
}

func parseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time, a date (2006-01-02), nor a duration ago (90m)", s)
}

type intList []int

func (l *intList) String() string { return joinInts(*l) }

func (l *intList) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a partition number", part)
		}
		*l = append(*l, n)
	}
	return nil
}

type int64List []int64

func (l *int64List) String() string {
	if l == nil {
		return ""
	}
	out := make([]string, len(*l))
	for i, n := range *l {
		out[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(out, ",")
}

func (l *int64List) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not an offset", part)
		}
		*l = append(*l, n)
	}
	return nil
}

func joinInts(ns []int) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(n)
	}
	return strings.Join(out, ",")
}
