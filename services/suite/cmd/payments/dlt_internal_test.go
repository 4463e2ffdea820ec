package main

import (
	"testing"
	"time"
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
	}
	for _, tt := range tests {
		if got := cell(tt.in, 5); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
