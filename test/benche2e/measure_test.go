package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/test/support/pgtest"
)

// Each whole 5 s of a step gets the rate of the terminal transfers whose
// atualizada_em falls in it; a window with none reads 0, pending ones and
// those outside the step are not counted, and the last, partial window is
// left out.
func TestSettledWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewPool(t)
	if _, err := db.Exec(ctx, `CREATE TABLE transferencia (status text NOT NULL, atualizada_em timestamptz NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return from.Add(d) }
	rows := []struct {
		status string
		at     time.Time
	}{
		{"LIQUIDADA", at(0)},                       // the first window's first instant
		{"REJEITADA", at(4999 * time.Millisecond)}, // the first window's last
		{"LIQUIDADA", at(5 * time.Second)},         // the second window
		{"PENDENTE", at(6 * time.Second)},          // not terminal
		{"LIQUIDADA", at(16 * time.Second)},        // the fourth window; the third settled nothing
		{"LIQUIDADA", at(-time.Millisecond)},       // before the step
		{"LIQUIDADA", at(21 * time.Second)},        // the partial fifth window
	}
	for _, r := range rows {
		if _, err := db.Exec(ctx, `INSERT INTO transferencia VALUES ($1, $2)`, r.status, r.at); err != nil {
			t.Fatal(err)
		}
	}
	got, err := settledWindows(ctx, db, from, at(22*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{2.0 / 5, 1.0 / 5, 0, 1.0 / 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settledWindows (-want +got):\n%s", diff)
	}
}

func TestWindowLine(t *testing.T) {
	t.Parallel()
	if got, want := windowLine([]float64{400, 600, 500}), "400 600 500 (lowest 0.80x their mean, highest 1.20x)"; got != want {
		t.Errorf("windowLine = %q, want %q", got, want)
	}
	if got, want := windowLine(nil), "no whole window"; got != want {
		t.Errorf("windowLine(nil) = %q, want %q", got, want)
	}
}
