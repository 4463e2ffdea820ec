package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
)

// api calls the services with the bench client's token.
type api struct {
	client *http.Client
	// bearer is the token of every call but deposits, minter the one of
	// deposits (contas:depositar only).
	bearer, minter string
}

func newAPI(bearer, minter string) *api {
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute}
	return &api{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, bearer: bearer, minter: minter}
}

// call sends body as JSON with the bearer token and returns the status and
// the decoded answer.
func (a *api) call(ctx context.Context, method, url, idemKey string, body any) (int, map[string]any, error) {
	return a.callAs(ctx, a.bearer, method, url, idemKey, body)
}

// callAs is call with another token.
func (a *api) callAs(ctx context.Context, bearer, method, url, idemKey string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, nil
}

// openAccounts opens n BRL accounts named prefix-i and funds each.
func (a *api) openAccounts(ctx context.Context, ledgerURL, prefix string, n int) ([]string, error) {
	ids := make([]string, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%04d", prefix, i)
		wg.Add(1)
		sem <- struct{}{}
		go func(id string) {
			defer wg.Done()
			defer func() { <-sem }()
			err := func() error {
				st, body, err := a.call(ctx, http.MethodPost, ledgerURL+"/contas", "", map[string]any{"id": id, "moeda": "BRL"})
				if err != nil || (st != http.StatusCreated && st != http.StatusOK) {
					return fmt.Errorf("open %s: %d %v %v", id, st, body, err)
				}
				st, body, err = a.callAs(ctx, a.minter, http.MethodPost, ledgerURL+"/contas/"+id+"/depositos", uuid.NewString(),
					map[string]any{"valorEmCentavos": int64(1_000_000_000)})
				if err != nil || st != http.StatusCreated {
					return fmt.Errorf("fund %s: %d %v %v", id, st, body, err)
				}
				return nil
			}()
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}(ids[i])
	}
	wg.Wait()
	return ids, first
}

// transferBody is a random transfer between two distinct accounts.
func transferBody(accounts []string) map[string]any {
	i := rand.IntN(len(accounts))
	j := rand.IntN(len(accounts) - 1)
	if j >= i {
		j++
	}
	return map[string]any{"contaOrigem": accounts[i], "contaDestino": accounts[j],
		"valorEmCentavos": 1 + rand.Int64N(100), "moeda": "BRL"}
}

// postResult is the outcome of one POST /transferencias.
type postResult struct {
	id      uuid.UUID // the Idempotency-Key, which is the transfer id
	status  int       // 0: transport error
	latency time.Duration
	late    time.Duration // how late it left against its schedule
	// overloaded is a 503 of problem type overloaded: shed at the door.
	overloaded bool
}

// openLoop offers rate requests per second for d: request i leaves at
// start + i/rate whatever the answers to the earlier ones. At most maxInFlight
// are outstanding; a request that finds them all busy leaves late (counted).
func (a *api) openLoop(ctx context.Context, url string, accounts []string, rate float64, d time.Duration, maxInFlight int) []postResult {
	n := int(rate * d.Seconds())
	results := make([]postResult, n)
	interval := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			t := time.NewTimer(w)
			select {
			case <-ctx.Done():
				t.Stop()
				wg.Wait()
				return results[:i]
			case <-t.C:
			}
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int, due time.Time) {
			defer wg.Done()
			defer func() { <-sem }()
			id := uuid.New()
			sent := time.Now()
			st, body, err := a.call(ctx, http.MethodPost, url+"/transferencias", id.String(), transferBody(accounts))
			if err != nil {
				st = 0
			}
			results[i] = postResult{id: id, status: st, latency: time.Since(sent), late: sent.Sub(due),
				overloaded: st == http.StatusServiceUnavailable && body["type"] == overloadedType}
		}(i, due)
	}
	wg.Wait()
	return results
}

// closedLoop runs clients that each send the next POST as soon as the last
// one answered, for d, and returns every result.
func (a *api) closedLoop(ctx context.Context, url string, accounts []string, clients int, d time.Duration) []postResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var all []postResult
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []postResult
			for ctx.Err() == nil {
				id := uuid.New()
				sent := time.Now()
				st, body, err := a.call(context.WithoutCancel(ctx), http.MethodPost, url+"/transferencias", id.String(), transferBody(accounts))
				if err != nil {
					st = 0
				}
				mine = append(mine, postResult{id: id, status: st, latency: time.Since(sent),
					overloaded: st == http.StatusServiceUnavailable && body["type"] == overloadedType})
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all
}

// floor measures one record's produce-to-consume time on topic with the
// suite's client settings (broker.NewProducer, as the relays produce;
// broker.NewGroup, as the consumers fetch), one record at a time.
func floor(ctx context.Context, cfg broker.Config, topic string, samples int) ([]time.Duration, error) {
	if _, err := broker.CreateTopics(ctx, cfg, []broker.TopicSpec{{Name: topic, Partitions: 1, ReplicationFactor: 1, Retention: time.Hour}}); err != nil {
		return nil, fmt.Errorf("create %s: %w", topic, err)
	}
	g, err := broker.NewGroup(cfg, broker.GroupConfig{Group: "bench-floor-" + uuid.NewString(), Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	p, err := broker.NewProducer(cfg) // as the relays
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Close() }()
	received := make(chan string, 1)
	go func() {
		for ctx.Err() == nil {
			f := g.Poll(ctx, 10)
			if f.Closed {
				return
			}
			for _, r := range f.Records {
				select {
				case received <- string(r.Value):
				default:
				}
			}
			g.AllowRebalance()
		}
	}()
	var out []time.Duration
	for i := range samples + 5 { // the first five warm up
		v := uuid.NewString()
		sent := time.Now()
		if err := p.Publish(ctx, broker.Record{Topic: topic, Key: []byte("k"), Value: []byte(v)}); err != nil {
			return nil, fmt.Errorf("produce: %w", err)
		}
		deadline := time.After(30 * time.Second)
	wait:
		for {
			select {
			case r := <-received:
				if r == v {
					break wait
				}
			case <-deadline:
				return nil, fmt.Errorf("record %d not consumed within 30s (the group may still be joining)", i)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if i >= 5 {
			out = append(out, time.Since(sent))
		}
	}
	return out, nil
}
