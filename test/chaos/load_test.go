//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/backoff"
	"github.com/paysuite/payments/test/chaos/history"
)

// transferReq is the body of POST /transferencias.
type transferReq = history.Transfer

// clientStats counts what the load's client saw.
type clientStats struct {
	posts, accepted202, conflict409, unavailable503, noRetryAfter, connErrors, status5xx, refused4xx atomic.Int64
}

// load is the open-loop client: it sends transfers on a fixed schedule,
// whatever the answers, and retries each unknown outcome (connection
// refused or reset, timeout, 503, 409 while the first request is in
// flight) with the same Idempotency-Key until it gets an answer, as the
// README tells API users to do: after a 503 no sooner than its
// Retry-After, after anything else with an exponential backoff. A client
// that came back sooner would turn every request the door shed into
// another one a second, a retry storm that grows with the backlog and
// takes the cores the flow needs to catch up.
type load struct {
	urls   []string // the transfers instances
	bearer string
	client *http.Client
	stats  clientStats
	// holdStats counts the hold commands (holds_load_test.go),
	// refundStats the refunds (refunds_load_test.go).
	holdStats   holdStats
	refundStats refundStats
	rec         *history.Recorder // every POST and GET, as it happens
	// inFlight counts the POSTs sent and not yet recorded: a fault that
	// must cut into writes waits for one (awaitInFlight).
	inFlight atomic.Int64

	mu       sync.Mutex
	requests map[string]transferReq  // every key sent
	accepted map[string]time.Time    // key -> first 202
	keys     []string                // the keys of accepted, in order: what the reader picks from
	refused  map[string]string       // key -> a final 4xx answer
	holds    map[string]holdPlan     // the keys sent as holds
	refunds  map[string]*refundTrack // every refund key sent
	toRefund map[string]bool         // the transfer keys the load means to refund once settled
	wg       sync.WaitGroup
}

func newLoad(urls []string, bearer string, rec *history.Recorder) *load {
	return &load{
		urls: urls, bearer: bearer, rec: rec,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second,
		}},
		requests: map[string]transferReq{}, accepted: map[string]time.Time{}, refused: map[string]string{}, holds: map[string]holdPlan{},
		refunds: map[string]*refundTrack{}, toRefund: map[string]bool{},
	}
}

// post sends one POST /transferencias; err is an unknown outcome.
func (l *load) post(ctx context.Context, base, bearer, key string, body []byte) (int, http.Header, []byte, error) {
	return l.send(ctx, base+"/transferencias", bearer, key, body)
}

// send POSTs body (none if nil) to u under key as bearer; err is an
// unknown outcome.
func (l *load) send(ctx context.Context, u, bearer, key string, body []byte) (int, http.Header, []byte, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", bearer)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// retryBackoff paces the load's retries of an outcome without a
// Retry-After (no answer, 409, another 5xx): 100 ms, doubling, at most
// 3.2 s, jittered.
var retryBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Multiplier: 2, Max: 3200 * time.Millisecond, Jitter: true}

// submit sends req under key, as the load's client, until it gets an
// answer (202 or a 4xx other than 409), or ctx ends.
func (l *load) submit(ctx context.Context, key string, r transferReq) {
	l.submitAs(ctx, l.bearer, 0, key, r)
}

// submitAs is submit with the Authorization header bearer; maxWait, if
// positive, caps every wait between two attempts (the probes of a fault,
// which measure when the flow is back: one client's request a second).
func (l *load) submitAs(ctx context.Context, bearer string, maxWait time.Duration, key string, r transferReq) {
	body, _ := json.Marshal(r)
	l.mu.Lock()
	l.requests[key] = r
	l.mu.Unlock()
	start := rand.IntN(len(l.urls))
	for attempt := 0; ; attempt++ {
		l.stats.posts.Add(1)
		invoked := time.Now()
		l.inFlight.Add(1)
		status, hdr, b, err := l.post(ctx, l.urls[(start+attempt)%len(l.urls)], bearer, key, body)
		l.recordPost(invoked, key, r, status, b, err)
		l.inFlight.Add(-1)
		wait := retryBackoff.Delay(attempt + 1)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			l.stats.connErrors.Add(1)
		case status == http.StatusAccepted:
			l.stats.accepted202.Add(1)
			l.mu.Lock()
			if _, ok := l.accepted[key]; !ok {
				l.accepted[key] = time.Now()
				l.keys = append(l.keys, key)
			}
			l.mu.Unlock()
			return
		case status == http.StatusConflict:
			l.stats.conflict409.Add(1)
		case status == http.StatusServiceUnavailable:
			l.stats.unavailable503.Add(1)
			if ra, perr := strconv.Atoi(hdr.Get("Retry-After")); perr == nil && ra >= 0 {
				wait = time.Duration(ra) * time.Second
			} else {
				l.stats.noRetryAfter.Add(1)
			}
		case status >= 500:
			l.stats.status5xx.Add(1)
		default:
			l.stats.refused4xx.Add(1)
			l.mu.Lock()
			l.refused[key] = fmt.Sprintf("%d %s", status, b)
			l.mu.Unlock()
			return
		}
		if maxWait > 0 {
			wait = min(wait, maxWait)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// answerBody is what the history keeps of an answer's body: a transfer's
// id and status (and, read by a GET, its accounts, amount and currency),
// or a problem's type.
type answerBody struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Type   string `json:"type"`
	// SettledCents is a captured hold's valorLiquidadoEmCentavos.
	SettledCents int64 `json:"valorLiquidadoEmCentavos"`
	// RefundedCents is a transfer's valorEstornadoEmCentavos.
	RefundedCents int64 `json:"valorEstornadoEmCentavos"`
	transferReq
}

// recordPost records one POST: a 202 or a final 4xx is a known outcome;
// a 409 (the first request in flight) and a 503 overloaded (shed at the
// door) wrote nothing. A 503 service-unavailable is unknown: the request
// deadline may have cut off a commit that waited for a stopped synchronous
// standby, and such a commit stands on the primary. No answer, or another
// 5xx, is unknown too.
func (l *load) recordPost(invoked time.Time, key string, r transferReq, status int, b []byte, err error) {
	outcome, ans := answer(status, b, err)
	switch {
	case status == http.StatusConflict:
		outcome = history.Fail
	case status == http.StatusServiceUnavailable && strings.HasSuffix(ans.Problem, "/overloaded"):
		outcome = history.Fail
	case status == http.StatusServiceUnavailable:
		outcome = history.Info
	}
	l.rec.Post(invoked, outcome, key, r, ans)
}

// answer turns an HTTP exchange into the history's outcome and answer.
func answer(status int, b []byte, err error) (history.Outcome, history.Answer) {
	if err != nil {
		return history.Info, history.Answer{Error: err.Error()}
	}
	var body answerBody
	_ = json.Unmarshal(b, &body) // a body that is not JSON leaves the fields empty
	ans := history.Answer{Status: status, ID: body.ID, TransferStatus: body.Status, SettledCents: body.SettledCents,
		RefundedCents: body.RefundedCents}
	if status >= 400 {
		ans.Problem, ans.TransferStatus = body.Type, ""
	}
	switch {
	case status >= 500 && status != http.StatusServiceUnavailable:
		return history.Info, ans
	case status == http.StatusServiceUnavailable:
		return history.Fail, ans
	}
	return history.OK, ans
}

// fetch GETs u as the load's client; err is an unknown outcome.
func (l *load) fetch(ctx context.Context, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", l.bearer)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// get reads one transfer through a transfers instance and records what it
// said; it returns the recorded outcome and answer.
func (l *load) get(ctx context.Context, base, id string) (history.Outcome, history.Answer) {
	invoked := time.Now()
	status, b, err := l.fetch(ctx, base+"/transferencias/"+id)
	outcome, ans := answer(status, b, err)
	if err == nil && status != http.StatusOK && status != http.StatusNotFound {
		outcome = history.Fail // a read that was refused says nothing of the transfer
	}
	if status == http.StatusOK {
		var body answerBody
		if json.Unmarshal(b, &body) == nil && body.transferReq != (transferReq{}) {
			ans.Transfer = &body.transferReq // the checker compares it with the accepted request
		}
	}
	l.rec.Get(invoked, outcome, id, ans)
	return outcome, ans
}

// read GETs random accepted transfers, perSecond a second (none if 0),
// until stop is closed: the history's reads during the faults.
func (l *load) read(ctx context.Context, stop <-chan struct{}, perSecond int) {
	if perSecond <= 0 {
		return
	}
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.mu.Lock()
		var key string
		if len(l.keys) > 0 {
			// Half the reads go to the newest transfers, in flight, half to any.
			if n%2 == 0 {
				key = l.keys[len(l.keys)-1-rand.IntN(min(len(l.keys), 50))]
			} else {
				key = l.keys[rand.IntN(len(l.keys))]
			}
		}
		l.mu.Unlock()
		if key != "" {
			l.wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				l.get(rctx, l.urls[n%len(l.urls)], key)
			})
		}
	}
}

// readAll reads every key once with a known outcome (retrying a failed
// or unknown read a few times), eight at a time: the history's final
// reads.
func (l *load) readAll(ctx context.Context, keys []string) (unread int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, key := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for attempt := range 5 {
				if o, _ := l.get(ctx, l.urls[(i+attempt)%len(l.urls)], key); o == history.OK {
					return
				}
			}
			mu.Lock()
			unread++
			mu.Unlock()
		})
	}
	wg.Wait()
	return unread
}

// run sends rate transfers a second until stop is closed; one in dupEvery
// is sent twice at once (a duplicate POST); a share flagHolds of them are
// holds (asHold), which the load then captures, cancels, races or leaves
// to expire (driveHold; left to expire only in the first
// flagHoldExpireFor, if set); a share flagRefunds of the others are
// refunded once settled (driveRefund). Submissions, hold commands and
// refunds go on after stop until answered or ctx ends; wait waits for
// them.
func (l *load) run(ctx context.Context, stop <-chan struct{}, rate int, pick func() transferReq) {
	const dupEvery = 10
	expireUntil := time.Now().Add(*flagHoldExpireFor)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		key, r := uuid.NewString(), pick()
		var plan *holdPlan
		refund := false
		if rand.Float64() < *flagHolds {
			var p holdPlan
			now := time.Now()
			r, p = asHold(r, now, *flagHoldExpireFor <= 0 || now.Before(expireUntil))
			plan = &p
			l.mu.Lock()
			l.holds[key] = p
			l.mu.Unlock()
			l.holdStats.holds.Add(1)
		} else {
			refund = rand.Float64() < *flagRefunds
			if refund {
				l.mu.Lock()
				l.toRefund[key] = true
				l.mu.Unlock()
			}
		}
		copies := 1
		if n%dupEvery == 0 {
			copies = 2
		}
		for i := range copies {
			l.wg.Go(func() {
				l.submit(ctx, key, r)
				switch {
				case plan != nil && i == 0:
					l.driveHold(ctx, key, r, *plan)
				case refund && i == 0:
					l.driveRefund(ctx, key, r, pickRefundFate())
				}
			})
		}
	}
}

func (l *load) wait() { l.wg.Wait() }

// snapshot returns copies of the bookkeeping.
func (l *load) snapshot() (requests map[string]transferReq, accepted map[string]time.Time, refused map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	requests, accepted, refused = map[string]transferReq{}, map[string]time.Time{}, map[string]string{}
	for k, v := range l.requests {
		requests[k] = v
	}
	for k, v := range l.accepted {
		accepted[k] = v
	}
	for k, v := range l.refused {
		refused[k] = v
	}
	return requests, accepted, refused
}

// api sends one request to a service and decodes a JSON answer; for the
// set-up (accounts, deposits), which runs before any fault.
func api(ctx context.Context, c *http.Client, bearer, method, u, key string, body, out any, want int) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", bearer)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s, want %d", method, u, resp.StatusCode, b, want)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// queryAlerts returns the alerts Prometheus had firing at any time in
// [from, to], as "alertname{job}" (plus origin_topic or group when set).
func (p *promServer) queryAlerts(ctx context.Context, from, to time.Time) (map[string]bool, error) {
	q := url.Values{
		"query": {`ALERTS{alertstate="firing"}`},
		"start": {strconv.FormatFloat(float64(from.UnixMilli())/1000, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(to.UnixMilli())/1000, 'f', 3, 64)},
		"step":  {"1"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, errors.Join(errNoProm, errors.New(body.Error))
	}
	out := map[string]bool{}
	for _, r := range body.Data.Result {
		m := r.Metric
		s := m["alertname"] + "{" + m["job"]
		if v := m["origin_topic"]; v != "" {
			s += "," + v
		}
		out[s+"}"] = true
	}
	return out, nil
}
