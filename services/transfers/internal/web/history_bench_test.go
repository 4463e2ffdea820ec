package web_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
)

// historyTransfers is how many transfers BenchmarkHistory's client has.
var historyTransfers = flag.Int("history-transfers", 1_000_000, "transfers of BenchmarkHistory's client")

// benchSeedSQL writes $1 transfers of client bench (one every 10 ms of
// history back from $2, ids random), 90% LIQUIDADA (paid to one of 100
// other clients), 8% REJEITADA, 2% PENDENTE, and $1/10 transfers of other
// clients over the same time, in one statement each.
const benchSeedSQL = `
INSERT INTO transferencia (id, conta_origem, conta_destino, valor_centavos, moeda, status, motivo_rejeicao,
    criada_em, atualizada_em, hash_requisicao, resposta_status, resposta_corpo, cliente_id, titular_destino)
SELECT gen_random_uuid(), CASE WHEN $3 THEN 'CC-BENCH' ELSE 'CC-' || (i % 1000) END, 'CC-D' || (i % 100), 100 + i % 1000, 'BRL',
    s.status, CASE WHEN s.status = 'REJEITADA' THEN 'SALDO_INSUFICIENTE' END,
    $2::timestamptz - i * interval '10 milliseconds', $2::timestamptz, sha256(i::text::bytea), 202,
    '{"id":"00000000-0000-0000-0000-000000000000","status":"PENDENTE"}'::bytea,
    CASE WHEN $3 THEN 'bench' ELSE 'other-' || (i % 1000) END,
    CASE WHEN s.status = 'LIQUIDADA' THEN 'payee-' || (i % 100) END
FROM generate_series(1, $1) AS i,
    LATERAL (SELECT CASE WHEN i % 50 = 0 THEN 'PENDENTE' WHEN i % 50 < 5 THEN 'REJEITADA' ELSE 'LIQUIDADA' END AS status) AS s`

// BenchmarkHistory measures GET /transferencias for a client with
// -history-transfers transfers (default a million), one request at a time
// over loopback against the real server (authentication, router,
// handler, PostgreSQL), each request beside the plain GET
// /transferencias/{id} of one of the client's transfers, interleaved in
// the same loop so that both see the same machine: page 1 (the newest
// 50), page 100 (reached by following 99 cursors), and a deep page (the
// first page of ate set 98% of the way back, the same index scan as a
// cursor that deep). Beside each, the store's own query (Store.Get,
// Store.History). Reported: each in µs, and each listing's ratio to the
// GET by id of the same layer (aim: at most 2 at any depth).
func BenchmarkHistory(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, store := openStore(b, transfersDSN(b), nil)
	logSettings(b, pool)
	newest := time.Now().UTC().Truncate(time.Second)
	start := time.Now()
	for _, mine := range []bool{true, false} {
		n := *historyTransfers
		if !mine {
			n /= 10
		}
		if _, err := pool.Exec(ctx, benchSeedSQL, n, newest, mine); err != nil {
			b.Fatalf("seed: %v", err)
		}
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE transferencia`); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d transfers of the client and %d of others in %s", *historyTransfers, *historyTransfers/10,
		time.Since(start).Round(time.Second))

	key, err := testKey.DeriveKey("bench listing cursor")
	if err != nil {
		b.Fatal(err)
	}
	history, err := transfer.NewHistory(store, key)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	iss := authtest.New(b)
	router := httpapi.NewRouter(log, httpapi.NewHTTPMetrics(nil), nil, nil, iss.Authenticator(b).Middleware)
	web.New(transfer.NewService(store, testTopics, testKey), log, testSpec).WithHistory(history).Mount(router)
	addrc, served := make(chan net.Addr, 1), make(chan error, 1)
	go func() { served <- httpapi.Serve(ctx, "127.0.0.1:0", router, log, func(a net.Addr) { addrc <- a }) }()
	base := "http://" + (<-addrc).String()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			b.Error(err)
		}
	}()
	transport := &http.Transport{MaxIdleConnsPerHost: 1}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: &authtest.Transport{Bearer: iss.Bearer(b, "bench", auth.ScopeTransfersRead), Base: transport}}
	get := func(path string, into any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return err
		}
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(res.Body)
			return fmt.Errorf("GET %s = %d %s", path, res.StatusCode, body)
		}
		if into == nil {
			_, err = io.Copy(io.Discard, res.Body)
			return err
		}
		return json.NewDecoder(res.Body).Decode(into)
	}

	// Page 100's cursor, and a transfer of the client to read by id.
	var page struct {
		Itens []struct {
			ID string `json:"id"`
		} `json:"itens"`
		ProximoCursor *string `json:"proximoCursor"`
	}
	path := "/transferencias"
	for range 99 {
		if err := get(path, &page); err != nil || page.ProximoCursor == nil {
			b.Fatalf("walk to page 100: %v", err)
		}
		path = "/transferencias?cursor=" + url.QueryEscape(*page.ProximoCursor)
	}
	page100, one := path, page.Itens[0].ID
	deepAt := newest.Add(-time.Duration(*historyTransfers) * 98 / 100 * 10 * time.Millisecond)
	deep := "/transferencias?ate=" + url.QueryEscape(deepAt.Format(time.RFC3339Nano))
	id := uuid.MustParse(one)
	all := append([]transfer.Status(nil), transfer.Statuses...)
	storePage := func(before time.Time) error {
		ts, err := store.History(ctx, transfer.HistoryQuery{Party: "bench", Statuses: all, Since: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
			Before: before, Limit: transfer.DefaultHistoryLimit + 1})
		if err == nil && len(ts) != transfer.DefaultHistoryLimit+1 {
			err = fmt.Errorf("a page of %d", len(ts))
		}
		return err
	}
	var page100Before time.Time
	{
		var last struct {
			Itens []struct {
				CriadaEm time.Time `json:"criadaEm"`
			} `json:"itens"`
		}
		if err := get(page100, &last); err != nil {
			b.Fatal(err)
		}
		page100Before = last.Itens[0].CriadaEm.Add(time.Microsecond)
	}

	ops := []historyOp{
		{"get", func() error { return get("/transferencias/"+one, nil) }},
		{"page1", func() error { return get("/transferencias", nil) }},
		{"page100", func() error { return get(page100, nil) }},
		{"deep", func() error { return get(deep, nil) }},
		{"store-get", func() error { _, err := store.Get(ctx, id); return err }},
		{"store-page1", func() error { return storePage(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)) }},
		{"store-page100", func() error { return storePage(page100Before) }},
		{"store-deep", func() error { return storePage(deepAt) }},
	}
	for _, op := range ops { // warm the caches and the prepared statements
		for range 20 {
			if err := op.run(); err != nil {
				b.Fatalf("%s: %v", op.name, err)
			}
		}
	}
	// The table is written once; the measurement is a sub-benchmark, which
	// the framework runs as often as it needs.
	b.Run(fmt.Sprintf("transfers=%d", *historyTransfers), func(b *testing.B) { measureHistory(b, ops) })
}

// historyOp is one request of BenchmarkHistory.
type historyOp struct {
	name string
	run  func() error
}

// measureHistory runs ops one after the other b.N times and reports each
// one's mean time and the listings' ratios to their GET by id (ops[0] for
// HTTP, ops[4] for the store).
func measureHistory(b *testing.B, ops []historyOp) {
	took := make([]time.Duration, len(ops))
	for range b.N {
		for i, op := range ops {
			t0 := time.Now()
			if err := op.run(); err != nil {
				b.Fatalf("%s: %v", op.name, err)
			}
			took[i] += time.Since(t0)
		}
	}
	b.StopTimer()
	us := func(i int) float64 { return float64(took[i].Microseconds()) / float64(b.N) }
	for i, op := range ops {
		b.ReportMetric(us(i), op.name+"-µs")
	}
	for i, op := range ops {
		switch op.name {
		case "page1", "page100", "deep":
			b.ReportMetric(us(i)/us(0), op.name+"/get")
		case "store-page1", "store-page100", "store-deep":
			b.ReportMetric(us(i)/us(4), op.name+"/store-get")
		}
	}
	b.ReportMetric(0, "ns/op")
}
