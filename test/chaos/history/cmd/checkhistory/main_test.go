package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/test/chaos/history"
)

func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, ops ...func(*history.Recorder)) string {
		path := filepath.Join(dir, name)
		rec, err := history.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			op(rec)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	at := time.Now()
	body := history.Transfer{From: "A1", To: "A2", AmountCents: 1, Currency: "BRL"}
	accepted := func(r *history.Recorder) {
		r.Post(at, history.OK, "k1", body, history.Answer{Status: 202, ID: "k1", TransferStatus: history.StatusPending})
	}
	settled := func(r *history.Recorder) {
		r.Get(time.Now(), history.OK, "k1", history.Answer{Status: 200, ID: "k1", TransferStatus: history.StatusSettled, Transfer: &body})
		r.Deposit(at, history.OK, "d1", history.Deposit{Account: "A1", Currency: "BRL", AmountCents: 1})
		r.Snapshot(time.Now(), history.Snapshot{
			Balances: []history.Balance{{Account: "F", Currency: "BRL", Funding: true, Cents: -1},
				{Account: "A1", Currency: "BRL", Cents: 0}, {Account: "A2", Currency: "BRL", Cents: 1}},
			Entries: []history.Entry{
				{Type: history.EntryDeposit, ID: "d1", Debit: "F", DebitCents: 1, Credit: "A1", CreditCents: 1},
				{Type: history.EntryTransfer, ID: "k1", Debit: "A1", DebitCents: 1, Credit: "A2", CreditCents: 1},
			},
		})
		rec := history.Record{Topic: "t", Key: "A1", EventID: "e1", TransferID: "k1", Source: "transfers", Seq: 1}
		r.Published(rec)
		rec.Group = "g"
		r.Consumed(rec)
	}
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"clean", []string{write("clean.jsonl", accepted, settled)}, 0, "not-terminal       0"},
		{"vacuous", []string{write("empty.jsonl")}, 1, "vacuous            1"},
		{"an anomaly", []string{write("pending.jsonl", accepted)}, 1, "not-terminal       1"},
		{"no such file", []string{filepath.Join(dir, "none.jsonl")}, 2, ""},
		{"no argument", nil, 2, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("output %q lacks %q", stdout.String(), tc.out)
			}
		})
	}
}
