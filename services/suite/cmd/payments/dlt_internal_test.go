package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "2026-11-29T21:00:00Z", want: time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)},
		{in: "2026-11-29T21:00:00.5-03:00", want: time.Date(2026, 11, 30, 0, 0, 0, 5e8, time.UTC)},
		{in: "2026-11-28", want: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "0s", want: now},
		{in: "-5m", wantErr: true},
		{in: "yesterday", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTime(tt.in, now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseTime(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && !got.Equal(tt.want) {
				t.Errorf("parseTime(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "-"},
		{"a\tb\nc", "a b c"},
		{"abcdefghij", "abcd…"},
		{"çãõéí", "çãõéí"},
		{"a\x1b[2Kb", `a\x1…`},
		{"\u202eab", `\u20…`},
	}
	for _, tt := range tests {
		if got := cell(tt.in, 5); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"CC-001 ok ç", "CC-001 ok ç"},
		{"a\tb\r\nc", "a b  c"},
		{"\x1b[2K\x1b[1A", `\x1b[2K\x1b[1A`},
		{"x\x7fy\u009bz", `x\x7fy\u009bz`},
		{"\u202aa\u202bb\u202cc\u202dd\u202ee", `\u202aa\u202bb\u202cc\u202dd\u202ee`},
		{"\u2066a\u2067b\u2068c\u2069", `\u2066a\u2067b\u2068c\u2069`},
		{"\u200e\u200f\u200b\ufeff", `\u200e\u200f\u200b\ufeff`},
		{"\u2028\u2029", `\u2028\u2029`},
		{"tag\U000E0041", `tag\U000e0041`},
		{"bad\xff\xfe", `bad\xff\xfe`},
	}
	for _, tt := range tests {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// outbox list-dead's last error, topic, key and type.
	if got, want := oneLine("publish:\x1b[2K  \u202edone\n", 80), `publish:\x1b[2K \u202edone`; got != want {
		t.Errorf("oneLine = %q, want %q", got, want)
	}
}

// hostile is a dead-lettered record whose every field a producer could
// write tries to rewrite the operator's terminal: erase the line and move
// up (hiding an UNVERIFIED line), or reverse the text's direction.
var hostile = dlt.Record{
	Topic: "t-dlt", Partition: 1, Offset: 7, Time: time.Unix(0, 0),
	Key: []byte("CC-001\u202e"), Value: []byte(`{"a":"\u009b2K"}`),
	Headers:          []broker.Header{{Key: "h\x1b", Value: []byte("v\u2066")}},
	Origin:           dlt.Origin{Topic: "t\x1b[1A", Partition: 1, Offset: 2, Group: "g\u200f"},
	ExceptionType:    "E\x07",
	ExceptionMessage: "boom\r\x1b[2K\x1b[1A\x1b[2K\u2067",
	EventID:          "id\x1b]0;title\x07", EventType: "T\u202d",
}

// unsafeIn returns the unsafe runes of out other than the line feeds that
// end its lines.
func unsafeIn(out string) []rune {
	var bad []rune
	for _, r := range out {
		if r != '\n' && (unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029') {
			bad = append(bad, r)
		}
	}
	return bad
}

// TestRecordFieldsPrintedSafely: dlt list (table and JSON) and replay's
// check lines print no control or bidirectional character from a record,
// whatever it holds, and the JSON still decodes to the record's values.
func TestRecordFieldsPrintedSafely(t *testing.T) {
	var table bytes.Buffer
	if err := writeTable(&table, []dlt.Record{hostile}); err != nil {
		t.Fatal(err)
	}
	if err := writeChecks(&table, dlt.Plan{DLT: "t-dlt", Target: "t\x1b[2K", Checks: []dlt.Check{
		{Record: hostile, Problem: "key differs: \x1b[1A\x1b[2K\u202e"}}}); err != nil {
		t.Fatal(err)
	}
	if bad := unsafeIn(table.String()); len(bad) > 0 {
		t.Errorf("the table prints unsafe runes %q:\n%s", bad, table.String())
	}
	if lines := strings.Count(table.String(), "\n"); lines != 4 {
		t.Errorf("%d lines, want 4 (header, record, target, UNVERIFIED):\n%s", lines, table.String())
	}
	if !strings.Contains(table.String(), "UNVERIFIED 1/7: key differs: \\x1b[1A") {
		t.Errorf("the UNVERIFIED line does not show the escapes:\n%s", table.String())
	}

	var js bytes.Buffer
	if err := writeJSON(&js, []dlt.Record{hostile}); err != nil {
		t.Fatal(err)
	}
	if bad := unsafeIn(js.String()); len(bad) > 0 {
		t.Errorf("the JSON prints unsafe runes %q:\n%s", bad, js.String())
	}
	var got jsonRecord
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatalf("the JSON does not decode: %v\n%s", err, js.String())
	}
	if got.Key != string(hostile.Key) || got.Value != string(hostile.Value) || got.ExceptionMessage != hostile.ExceptionMessage ||
		got.OriginTopic != hostile.Origin.Topic || got.OriginGroup != hostile.Origin.Group || got.Headers["h\x1b"] != "v\u2066" {
		t.Errorf("the JSON decodes to other values: %+v", got)
	}
}

// TestEscapeJSONControls: above U+FFFF a rune is escaped as a surrogate
// pair that decodes back to it.
func TestEscapeJSONControls(t *testing.T) {
	in, err := json.Marshal("a\U000E0041\u202e\u0085")
	if err != nil {
		t.Fatal(err)
	}
	out := escapeJSONControls(in)
	if want := `"a\udb40\udc41\u202e\u0085"`; string(out) != want {
		t.Errorf("escapeJSONControls(%s) = %s, want %s", in, out, want)
	}
	var s string
	if err := json.Unmarshal(out, &s); err != nil || s != "a\U000E0041\u202e\u0085" {
		t.Errorf("decodes to %q, %v", s, err)
	}
}
