package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// seedSQL writes $1 transfers in one statement, as fast as the server
// writes rows: transfer i is created at $2 minus i seconds (the same second
// as another now and then, so that ids break ties), by client-<i mod
// $3>, from CC-<i mod 7> to CC-<i mod 5 + 7>, LIQUIDADA (paid to
// client-<i mod ($3+2)> when that is not client-<$3+1>: client-<$3> is
// paid but creates nothing) but for every tenth, REJEITADA,
// and every 50th, PENDENTE.
const seedSQL = `
INSERT INTO transferencia (id, conta_origem, conta_destino, valor_centavos, moeda, status, motivo_rejeicao,
    criada_em, atualizada_em, hash_requisicao, resposta_status, resposta_corpo, cliente_id, titular_destino)
SELECT gen_random_uuid(), 'CC-' || (i % 7), 'CC-' || (i % 5 + 7), 100 + i, 'BRL', s.status,
    CASE WHEN s.status = 'REJEITADA' THEN 'SALDO_INSUFICIENTE' END,
    $2::timestamptz - (i / 2) * interval '1 second', $2::timestamptz, sha256(i::text::bytea), 202, '{}'::bytea,
    'client-' || (i % $3), CASE WHEN s.status = 'LIQUIDADA' AND i % ($3 + 2) <> $3 + 1 THEN 'client-' || (i % ($3 + 2)) END
FROM generate_series(1, $1) AS i,
    LATERAL (SELECT CASE WHEN i % 50 = 0 THEN 'PENDENTE' WHEN i % 10 = 0 THEN 'REJEITADA' ELSE 'LIQUIDADA' END AS status) AS s`

// seed writes n transfers of clients client-0 .. client-<clients-1>
// (seedSQL) and updates the planner's statistics.
func seed(tb testing.TB, db *pg.DB, n, clients int, newest time.Time) {
	tb.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, seedSQL, n, newest, clients); err != nil {
		tb.Fatalf("seed %d transfers: %v", n, err)
	}
	if _, err := db.Exec(ctx, `ANALYZE transferencia`); err != nil {
		tb.Fatal(err)
	}
}

// everything reads every transfer, in the listing's order.
func everything(t *testing.T, db *pg.DB) []transfer.Transfer {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id, conta_origem, conta_destino, status, coalesce(cliente_id, ''),
        coalesce(titular_destino, ''), criada_em FROM transferencia ORDER BY criada_em DESC, id DESC`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []transfer.Transfer
	for rows.Next() {
		var tr transfer.Transfer
		var status string
		if err := rows.Scan(&tr.ID, &tr.Source, &tr.Destination, &status, &tr.Client, &tr.DestHolder, &tr.CreatedAt); err != nil {
			t.Fatal(err)
		}
		tr.Status = transfer.Status(status)
		out = append(out, tr)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHistoryQueries: every kind of listing, paged through with the
// store's keyset queries, lists exactly what a filter over every row
// selects, in the order (criada_em, id) newest first, each once.
func TestHistoryQueries(t *testing.T) {
	t.Parallel()
	db, store := newStore(t, "test", nil)
	newest := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	seed(t, db, 3000, 3, newest)
	all := everything(t, db)
	since, before := newest.Add(-900*time.Second), newest.Add(-200*time.Second)
	tests := []struct {
		name string
		q    transfer.HistoryQuery
		keep func(transfer.Transfer) bool
	}{
		{"one client's", transfer.HistoryQuery{Party: "client-1"},
			func(t transfer.Transfer) bool { return t.Client == "client-1" || t.DestHolder == "client-1" }},
		{"one client's rejected and pending", transfer.HistoryQuery{Party: "client-2",
			Statuses: []transfer.Status{transfer.StatusRejected, transfer.StatusPending}},
			func(t transfer.Transfer) bool {
				return (t.Client == "client-2" || t.DestHolder == "client-2") && t.Status != transfer.StatusSettled
			}},
		{"paid to a client that creates none", transfer.HistoryQuery{Party: "client-3"},
			func(t transfer.Transfer) bool { return t.DestHolder == "client-3" }},
		{"one client's in a range", transfer.HistoryQuery{Party: "client-0", Since: since, Before: before},
			func(t transfer.Transfer) bool {
				return (t.Client == "client-0" || t.DestHolder == "client-0") && !t.CreatedAt.Before(since) && t.CreatedAt.Before(before)
			}},
		{"one client's of an account", transfer.HistoryQuery{Party: "client-1", Account: "CC-8"},
			func(t transfer.Transfer) bool {
				return (t.Client == "client-1" || t.DestHolder == "client-1") && (t.Source == "CC-8" || t.Destination == "CC-8")
			}},
		{"every client's", transfer.HistoryQuery{},
			func(transfer.Transfer) bool { return true }},
		{"every client's settled in a range", transfer.HistoryQuery{Statuses: []transfer.Status{transfer.StatusSettled},
			Since: since, Before: before},
			func(t transfer.Transfer) bool {
				return t.Status == transfer.StatusSettled && !t.CreatedAt.Before(since) && t.CreatedAt.Before(before)
			}},
		{"an account's, of every client", transfer.HistoryQuery{Account: "CC-3"},
			func(t transfer.Transfer) bool { return t.Source == "CC-3" || t.Destination == "CC-3" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var want []uuid.UUID
			for _, tr := range all {
				if tc.keep(tr) {
					want = append(want, tr.ID)
				}
			}
			if len(want) < 20 {
				t.Fatalf("the seed gives only %d transfers to this listing", len(want))
			}
			q := tc.q
			if len(q.Statuses) == 0 {
				q.Statuses = transfer.Statuses
			}
			if q.Since.IsZero() {
				q.Since = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
			}
			if q.Before.IsZero() {
				q.Before = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
			}
			q.Limit = 97
			var got []uuid.UUID
			for {
				page, err := store.History(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				for _, tr := range page {
					got = append(got, tr.ID)
				}
				if len(page) < q.Limit {
					break
				}
				last := page[len(page)-1]
				q.Before, q.BeforeID = last.CreatedAt, last.ID
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("listing mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHistoryUsesItsIndexes: on a table of 30,000 transfers, each
// listing's plan reads the index migration 00008 (or 00003) made for it,
// and none reads the table whole; a client's or every client's merges its
// branches in order without sorting them: a page costs the same at any
// depth. Checked on the plan the server keeps for the prepared statement
// (its generic plan, forced) as on a plan for the values.
func TestHistoryUsesItsIndexes(t *testing.T) {
	t.Parallel()
	db, _ := newStore(t, "test", nil)
	newest := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	seed(t, db, 30_000, 20, newest)
	statuses := []string{"PENDENTE", "RESERVADA", "LIQUIDADA", "REJEITADA", "CANCELADA", "EXPIRADA"}
	since, before := newest.Add(-24*time.Hour), newest.Add(-time.Hour)
	tests := []struct {
		name    string
		sql     string
		args    []any
		indexes []string
	}{
		{"a client's", postgres.HistoryByPartySQL, []any{"client-3", statuses, since, before, uuid.Nil, 51},
			[]string{"transferencia_cliente_historico", "transferencia_titular_historico"}},
		{"a client's by status", postgres.HistoryByPartySQL, []any{"client-3", []string{"REJEITADA"}, since, before, uuid.Nil, 51},
			[]string{"transferencia_cliente_historico", "transferencia_titular_historico"}},
		{"every client's", postgres.HistoryAllSQL, []any{statuses, since, before, uuid.Nil, 51},
			[]string{"transferencia_historico"}},
		{"an account's", postgres.HistoryByAccountSQL, []any{"CC-3", statuses, since, before, uuid.Nil, "client-3", 51},
			[]string{"transferencia_origem_recentes", "transferencia_destino_recentes"}},
	}
	for _, tc := range tests {
		for _, generic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/generic=%v", tc.name, generic), func(t *testing.T) {
				ctx := context.Background()
				conn, err := db.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Release()
				mode := "force_custom_plan"
				if generic {
					mode = "force_generic_plan"
				}
				if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
					t.Fatal(err)
				}
				defer func() { _, _ = conn.Exec(ctx, "RESET plan_cache_mode") }()
				var plan []byte
				if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+tc.sql, tc.args...).Scan(&plan); err != nil {
					t.Fatal(err)
				}
				nodes := planNodes(t, plan)
				for _, idx := range tc.indexes {
					if !slices.Contains(nodes, "Index Scan "+idx) {
						t.Errorf("the plan does not scan %s:\n%s", idx, plan)
					}
				}
				for _, n := range nodes {
					if strings.HasPrefix(n, "Seq Scan") || strings.HasPrefix(n, "Bitmap") {
						t.Errorf("the plan reads the table with %s:\n%s", n, plan)
					}
					// A client's or every client's listing merges its
					// branches in order: it reads no more than a page (a
					// branch of a status not asked for sorts nothing).
					if strings.HasPrefix(n, "Sort") && n != "Sort of Result" && tc.sql != postgres.HistoryByAccountSQL {
						t.Errorf("the plan sorts:\n%s", plan)
					}
				}
			})
		}
	}
}

// planNodes lists the nodes of an EXPLAIN (FORMAT JSON) plan, each as its
// type, with its index when it scans one (a sort, with what it sorts:
// "Sort of Result" sorts a branch proven empty).
func planNodes(t *testing.T, plan []byte) []string {
	t.Helper()
	type node struct {
		Type  string `json:"Node Type"`
		Index string `json:"Index Name"`
		Plans []node `json:"Plans"`
	}
	var doc []struct{ Plan node }
	if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	var out []string
	var walk func(n node)
	walk = func(n node) {
		s := n.Type
		if n.Type == "Sort" && len(n.Plans) == 1 {
			s += " of " + n.Plans[0].Type
			for _, c := range n.Plans[0].Plans {
				s += " over " + c.Type
			}
		}
		if n.Index != "" {
			s += " " + n.Index
		}
		out = append(out, s)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	return out
}
