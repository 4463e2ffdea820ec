package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// BenchmarkPostTransfer measures POST /transferencias end to end: a
// concurrent load generator over loopback against a real HTTP server
// (httpapi.Serve on 127.0.0.1:0, the suite's router and middleware), each
// request a new transfer. Beside it, in the same run and with the same
// concurrency and pool, the database ceiling: the same transaction
// (advisory-lock claim, transfer row with its idempotency record, outbox
// row) executed directly through the pgx store. ns/op is the HTTP side.
// Reported: req/s, p50-ms, p99-ms (HTTP), db-tx/s, db-p50-ms, db-p99-ms
// (ceiling), and http/db, the share of the ceiling HTTP reaches. The
// outbox relay does not run, on either side.
func BenchmarkPostTransfer(b *testing.B) {
	for _, c := range []int{8, 32} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { benchmarkPost(b, c) })
	}
}

func benchmarkPost(b *testing.B, concurrency int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, store := openStore(b, transfersDSN(b), func(c *pgxpool.Config) { c.MaxConns = int32(concurrency) }) //nolint:gosec // small
	logSettings(b, pool)
	log := slog.New(slog.DiscardHandler)
	iss := authtest.New(b)
	router := benchRouter(store, iss.Authenticator(b).Middleware)
	addrc := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(ctx, "127.0.0.1:0", router, log, func(a net.Addr) { addrc <- a }) }()
	url := "http://" + (<-addrc).String() + "/transferencias"
	defer func() {
		cancel()
		if err := <-served; err != nil {
			b.Error(err)
		}
	}()
	base := &http.Transport{MaxIdleConns: concurrency, MaxIdleConnsPerHost: concurrency}
	client := &http.Client{Transport: &authtest.Transport{Bearer: iss.Bearer(b, "bench", auth.ScopeTransfersCreate), Base: base}}
	defer base.CloseIdleConnections()
	post := func(body []byte) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", uuid.NewString())
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	}
	bodies := make([][]byte, 64) // a few source accounts, as a real load has
	for i := range bodies {
		bodies[i] = []byte(fmt.Sprintf(`{"contaOrigem":"CC-%03d","contaDestino":"CC-999","valorEmCentavos":%d,"moeda":"BRL"}`, i, 100+i))
	}
	direct := func(i int) error {
		_, err := store.Create(ctx, creation(i))
		return err
	}
	viaHTTP := func(i int) error { return post(bodies[i%len(bodies)]) }

	// Warm up both paths: connections, plans, pools.
	if _, err := load(4*concurrency, concurrency, direct); err != nil {
		b.Fatal(err)
	}
	if _, err := load(4*concurrency, concurrency, viaHTTP); err != nil {
		b.Fatal(err)
	}

	n := max(b.N, concurrency)
	b.ResetTimer()
	httpRun, err := load(n, concurrency, viaHTTP)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	dbRun, err := load(n, concurrency, direct)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(httpRun.rate(), "req/s")
	b.ReportMetric(httpRun.percentile(0.50), "p50-ms")
	b.ReportMetric(httpRun.percentile(0.99), "p99-ms")
	b.ReportMetric(dbRun.rate(), "db-tx/s")
	b.ReportMetric(dbRun.percentile(0.50), "db-p50-ms")
	b.ReportMetric(dbRun.percentile(0.99), "db-p99-ms")
	b.ReportMetric(httpRun.rate()/dbRun.rate(), "http/db")
}

// creation is the Creation the service builds for a request, built here
// without HTTP.
func creation(i int) transfer.Creation {
	id := uuid.New()
	now := time.Now().UTC().Truncate(time.Microsecond)
	src := fmt.Sprintf("CC-%03d", i%64)
	payload, _ := json.Marshal(events.Requested{EventID: uuid.New(), TransferID: id, SourceAccount: src,
		DestAccount: "CC-999", AmountCents: int64(100 + i%64), Currency: "BRL", OccurredAt: now})
	resp, _ := json.Marshal(map[string]string{"id": id.String(), "status": "PENDENTE"})
	req := transfer.Request{Source: src, Destination: "CC-999", AmountCents: int64(100 + i%64), Currency: "BRL"}
	return transfer.Creation{
		Transfer: transfer.Transfer{ID: id, Source: src, Destination: "CC-999", AmountCents: req.AmountCents,
			Currency: "BRL", Status: transfer.StatusPending, CreatedAt: now, UpdatedAt: now, Client: "bench"},
		Fingerprint: req.Fingerprint(),
		Response:    transfer.Response{StatusCode: http.StatusAccepted, Body: append(resp, '\n')},
		Event: events.Message{Topic: events.DefaultTopics.Requested, Key: src, Type: events.TypeRequested, Payload: payload,
			AggregateType: transfer.AggregateType, AggregateID: id.String(),
			Headers: map[string]string{events.HeaderCorrelationID: id.String()}},
	}
}

// run is the outcome of a load: its wall time and each operation's latency.
type run struct {
	elapsed   time.Duration
	latencies []time.Duration
}

func (r run) rate() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }

// percentile returns the q-quantile latency in milliseconds.
func (r run) percentile(q float64) float64 {
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	i := min(int(q*float64(len(s))), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}

// load runs op n times from concurrency workers, as fast as they go.
func load(n, concurrency int, op func(i int) error) (run, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return run{elapsed: time.Since(start), latencies: lat}, firstErr
}

func logSettings(b *testing.B, pool *pgxpool.Pool) {
	var fsync, syncCommit, version string
	err := pool.QueryRow(context.Background(),
		`SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('server_version')`).Scan(&fsync, &syncCommit, &version)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("PostgreSQL %s, fsync=%s, synchronous_commit=%s", version, fsync, syncCommit)
}
