package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
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

// newAPI holds at most maxConns connections to each service (0: no
// bound). Unbounded, an open loop that finds the service slow opens a
// connection for every request outstanding, thousands at 5x the plateau,
// and each costs both sides the cores the step measures.
func newAPI(bearer, minter string, maxConns int) *api {
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, MaxConnsPerHost: maxConns, IdleConnTimeout: time.Minute}
	return &api{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, bearer: bearer, minter: minter}
}

// call sends body as JSON with the bearer token and returns the status and
// the decoded answer.
func (a *api) call(ctx context.Context, method, url, idemKey string, body any) (int, map[string]any, error) {
	return a.callAs(ctx, a.bearer, method, url, idemKey, body)
}

// callAs is call with another token.
func (a *api) callAs(ctx context.Context, bearer, method, url, idemKey string, body any) (int, map[string]any, error) {
	var raw []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		raw = b
	}
	st, b, err := a.send(ctx, bearer, method, url, idemKey, raw)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return st, out, nil
}

// send sends body (none if nil) as JSON with bearer's token and returns the
// status and the answer, read to the end so that the connection is reused.
func (a *api) send(ctx context.Context, bearer, method, url, idemKey string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
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
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
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

// postResult is the outcome of one POST /transferencias.
type postResult struct {
	id      uuid.UUID // the Idempotency-Key, which is the transfer id
	status  int       // 0: transport error
	latency time.Duration
	late    time.Duration // how late it left against its schedule
	// overloaded is a 503 of problem type overloaded: shed at the door.
	overloaded bool
}

// post sends one POST /transferencias of a random transfer, keyed id, and
// reports the status (0 on a transport error) and whether it was shed at
// the door. It is the load generator's request, on the same cores as the
// suite: the body is appended rather than marshalled, and the answer is
// parsed only for a 503's problem type.
func (a *api) post(ctx context.Context, url string, id uuid.UUID, accounts []string) (status int, overloaded bool) {
	st, b, err := a.send(ctx, a.bearer, http.MethodPost, url, id.String(), transferJSON(accounts))
	if err != nil {
		return 0, false
	}
	return st, st == http.StatusServiceUnavailable && bytes.Contains(b, overloadedJSON)
}

// overloadedJSON is the problem type of a shed request as it reads in a
// problem+json body.
var overloadedJSON = []byte(`"type":"` + overloadedType + `"`)

// transferJSON is a random transfer between two distinct accounts, as
// POST /transferencias takes it.
func transferJSON(accounts []string) []byte {
	i := rand.IntN(len(accounts))
	j := rand.IntN(len(accounts) - 1)
	if j >= i {
		j++
	}
	b := make([]byte, 0, 128)
	b = append(b, `{"contaOrigem":"`...)
	b = append(b, accounts[i]...)
	b = append(b, `","contaDestino":"`...)
	b = append(b, accounts[j]...)
	b = append(b, `","valorEmCentavos":`...)
	b = strconv.AppendInt(b, 1+rand.Int64N(100), 10)
	return append(b, `,"moeda":"BRL"}`...)
}

// openLoop offers rate requests per second for d: request i leaves at
// start + i/rate whatever the answers to the earlier ones. At most maxInFlight
// are outstanding; a request that finds them all busy leaves late (counted).
// The pacing sleeps only for gaps of a millisecond or more: at a few
// thousand a second the requests due within one leave together rather than
// each on a timer of its own (the generator shares the cores it loads).
func (a *api) openLoop(ctx context.Context, url string, accounts []string, rate float64, d time.Duration, maxInFlight int) []postResult {
	n := int(rate * d.Seconds())
	results := make([]postResult, n)
	interval := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w >= time.Millisecond {
			t.Reset(w)
			select {
			case <-ctx.Done():
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
			st, shed := a.post(ctx, url+"/transferencias", id, accounts)
			results[i] = postResult{id: id, status: st, latency: time.Since(sent), late: sent.Sub(due), overloaded: shed}
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
				st, shed := a.post(context.WithoutCancel(ctx), url+"/transferencias", id, accounts)
				mine = append(mine, postResult{id: id, status: st, latency: time.Since(sent), overloaded: shed})
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
