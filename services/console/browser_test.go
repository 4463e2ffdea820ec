package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/dlt"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/services/console"
	"github.com/paysuite/payments/test/e2e"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/poll"
)

// EnvDocsScreenshots, when set to a folder (docs/console), receives one
// screenshot per page for docs/console.md.
const EnvDocsScreenshots = "CONSOLE_DOCS_SCREENSHOTS"

// env is the suite, the console in front of it, and a browser.
type env struct {
	suite    *e2e.Suite
	url      string
	operator string // the operator's token
	browser  context.Context
}

// startConsole runs the console in this process against s; its logs go
// to logs. configure, when given, changes the configuration first.
func startConsole(tb testing.TB, s *e2e.Suite, logs io.Writer, configure ...func(*console.Config)) string {
	tb.Helper()
	cfg := console.Config{
		HTTPAddr:         "127.0.0.1:0",
		TransfersURL:     s.Transfers.URL(),
		LedgerURL:        s.Ledger.URL(),
		AntifraudURL:     s.Antifraud.URL(),
		NotificationsURL: s.Notifications.URL(),
		Auth:             s.Issuer.Config(),
		SessionTTL:       time.Hour,
		ActionsPerMinute: 100,
		SampleInterval:   200 * time.Millisecond,
	}
	for _, f := range configure {
		f(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- console.Run(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)), func(a net.Addr) { addr <- a.String() })
	}()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("console: %v", err)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case err := <-done:
		tb.Fatalf("console did not start: %v", err)
	case <-time.After(30 * time.Second):
		tb.Fatal("console did not start within 30 s")
	}
	return ""
}

// newBrowser starts Debian's chromium, headless, at 1280x800.
func newBrowser(tb testing.TB) context.Context {
	tb.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		tb.Fatalf("chromium is not installed (test/infra/ensure-chromium.sh installs it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the CI runs as root
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs actions in the browser with a deadline.
func (e *env) run(tb testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(e.browser, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
}

// value runs one action that returns a value, with a deadline.
func value[T any](tb testing.TB, e *env, what string, a chromedp.Action[T]) T {
	tb.Helper()
	ctx, cancel := context.WithTimeout(e.browser, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	return v
}

// cookies returns the browser's cookies of the console.
func (e *env) cookies(tb testing.TB) []*network.Cookie {
	tb.Helper()
	ctx, cancel := context.WithTimeout(e.browser, 30*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{e.url}})
	if err != nil {
		tb.Fatalf("read cookies: %v", err)
	}
	return res.Cookies
}

// screenshot saves the page under the test's output folder, and under
// the docs folder as docName when CONSOLE_DOCS_SCREENSHOTS names one.
func (e *env) screenshot(t *testing.T, docName string) {
	t.Helper()
	png := value(t, e, "screenshot", chromedp.FullScreenshot(100))
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + ".png"
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), name), png, 0o600); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv(EnvDocsScreenshots); dir != "" && docName != "" {
		if err := os.WriteFile(filepath.Join(dir, docName), png, 0o600); err != nil { //nolint:gosec // the test names docName; dir is the developer's own folder
			t.Fatal(err)
		}
	}
}

func (e *env) text(t *testing.T, sel string) string {
	t.Helper()
	return value(t, e, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// signIn pastes the operator's token on the sign-in page.
func (e *env) signIn(t *testing.T, token string) {
	t.Helper()
	e.run(t, "sign in",
		chromedp.Navigate(e.url+"/find"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#q")),
	)
}

// find types q in the find form and submits it.
func (e *env) find(t *testing.T, q string) {
	t.Helper()
	e.run(t, "find "+q,
		chromedp.Navigate(e.url+"/find"),
		chromedp.WaitVisible(chromedp.CSS("#q")),
		chromedp.SendKeys(chromedp.CSS("#q"), q),
		chromedp.Submit(chromedp.CSS("#q")),
	)
	// The answer is another URL (the transfer, the account, or the find
	// page with the query): wait for it before reading the page.
	poll.Until(t, 30*time.Second, "the page after find "+q, func() (bool, string) {
		ctx, cancel := context.WithTimeout(e.browser, 5*time.Second)
		defer cancel()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		return err == nil && loc != e.url+"/find", loc
	})
	e.run(t, "page after find", chromedp.WaitReady(chromedp.CSS("main h1")))
}

// transfer posts a transfer as client A and waits until it is final.
func transfer(t *testing.T, s *e2e.Suite, from, to string, cents int64) e2e.Transfer {
	t.Helper()
	id := uuid.NewString()
	r, err := s.PostTransfer(t.Context(), id, e2e.TransferRequest{From: from, To: to, AmountCents: cents, Currency: "BRL"})
	if err != nil || r.Status != http.StatusAccepted {
		t.Fatalf("POST /transferencias = %v %v", r.Status, err)
	}
	return s.WaitTerminal(t, []string{id}, 30*time.Second)[id]
}

// httpClient is a client that carries the browser's session cookie, for
// the requests a page cannot send (forged and replayed forms).
func (e *env) httpClient(t *testing.T, withSession bool) *http.Client {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if !withSession {
		return c
	}
	c.Transport = cookieTransport{cookies: e.cookies(t)}
	return c
}

type cookieTransport struct{ cookies []*network.Cookie }

func (ct cookieTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for _, c := range ct.cookies {
		r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value}) //nolint:gosec // a request cookie: attributes belong to Set-Cookie
	}
	return http.DefaultTransport.RoundTrip(r)
}

func postForm(t *testing.T, c *http.Client, u string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func requeueAudits(t *testing.T, s *e2e.Suite) int {
	t.Helper()
	var n int
	if err := s.Transfers.DB.QueryRow(t.Context(), `SELECT count(*) FROM outbox_audit WHERE action = 'requeue'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConsoleInBrowser drives the console in Chromium against the real
// suite on the shared PostgreSQL and Kafka.
func TestConsoleInBrowser(t *testing.T) {
	s := e2e.NewSuite(t, e2e.Options{Partitions: 2})
	logs := &logtest.Buffer{}
	e := &env{suite: s, url: startConsole(t, s, logs), operator: s.Issuer.Token(t, "ana", auth.ScopeOperations), browser: newBrowser(t)}
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	rich, dest, empty := "RICH-"+suffix, "DEST-"+suffix, "EMPTY-"+suffix
	for _, a := range []string{rich, dest, empty} {
		s.OpenAccount(t, a, "BRL")
	}
	s.Deposit(t, rich, 100_000)

	t.Run("sign in refuses a token without operacoes", func(t *testing.T) {
		e.run(t, "sign in as a client",
			chromedp.Navigate(e.url+"/signin"),
			chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), s.Issuer.Token(t, "cliente-a", auth.ScopeTransfersRead)),
			chromedp.Submit(chromedp.CSS("#token")),
			chromedp.WaitVisible(chromedp.CSS(".error")))
		if got := e.text(t, ".error"); !strings.Contains(got, "operacoes") {
			t.Errorf("error = %q, want it to name the operacoes scope", got)
		}
		e.screenshot(t, "")
	})

	t.Run("sign in", func(t *testing.T) {
		e.run(t, "open sign-in", chromedp.Navigate(e.url+"/signin"), chromedp.WaitVisible(chromedp.CSS("#token")))
		e.screenshot(t, "signin.png")
		e.signIn(t, e.operator)
		if got := e.text(t, ".who"); !strings.Contains(got, "ana") {
			t.Errorf("header = %q, want the operator ana", got)
		}
		cookies := e.cookies(t)
		if len(cookies) != 1 || !cookies[0].HTTPOnly || !cookies[0].Secure || cookies[0].SameSite != network.CookieSameSiteStrict {
			t.Errorf("cookies = %+v, want one HttpOnly, Secure, SameSite=Strict session cookie", cookies)
		}
		e.screenshot(t, "find.png")
	})

	settled := transfer(t, s, rich, dest, 30_000)
	if settled.Status != "LIQUIDADA" {
		t.Fatalf("transfer %s = %s, want LIQUIDADA", settled.ID, settled.Status)
	}

	t.Run("settled transfer shows its steps in order", func(t *testing.T) {
		e.find(t, settled.ID)
		titles := value(t, e, "steps", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#steps > li')].map(li => li.className + '|' + li.querySelector('h2').firstChild.textContent.trim())`))
		want := []string{"step done|Request accepted", "step done|Published to Kafka", "step done|Antifraud decision",
			"step done|Ledger settlement", "step done|Status projected"}
		if len(titles) < len(want) {
			t.Fatalf("steps = %q, want at least %q", titles, want)
		}
		for i, w := range want {
			if titles[i] != w {
				t.Errorf("step %d = %q, want %q (all: %q)", i, titles[i], w, titles)
			}
		}
		if got := e.text(t, "#status"); got != "LIQUIDADA" {
			t.Errorf("status = %q, want LIQUIDADA", got)
		}
		times := value(t, e, "times", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#steps > li time')].map(t => t.getAttribute('datetime'))`))
		// Accepted, decided, settled, projected happen in this order. The
		// publication time is when the relay recorded the broker's
		// acknowledgement, which a fast consumer may beat: it is not
		// compared.
		if len(times) < 5 {
			t.Fatalf("step times = %q, want 5 or more", times)
		}
		for _, pair := range [][2]int{{0, 1}, {0, 2}, {2, 3}, {3, 4}} {
			if times[pair[1]] < times[pair[0]] {
				t.Errorf("step %d at %s before step %d at %s", pair[1], times[pair[1]], pair[0], times[pair[0]])
			}
		}
		page := e.text(t, "#steps")
		for _, w := range []string{"client cliente-a, request id ", "score", "debit", "credit", "700.00 BRL", "300.00 BRL"} {
			if !strings.Contains(page, w) {
				t.Errorf("journey lacks %q:\n%s", w, page)
			}
		}
		e.screenshot(t, "journey.png")
	})

	t.Run("rejected transfer shows the reason", func(t *testing.T) {
		rejected := transfer(t, s, empty, dest, 5_000)
		if rejected.Status != "REJEITADA" {
			t.Fatalf("transfer %s = %s, want REJEITADA", rejected.ID, rejected.Status)
		}
		e.find(t, rejected.ID)
		if got := e.text(t, "#reason"); got != "SALDO_INSUFICIENTE" {
			t.Errorf("reason = %q, want SALDO_INSUFICIENTE", got)
		}
		if got := e.text(t, "#steps"); !strings.Contains(got, "Ledger rejection") || !strings.Contains(got, "rejected: SALDO_INSUFICIENTE") {
			t.Errorf("steps lack the ledger's rejection:\n%s", got)
		}
		e.screenshot(t, "")
	})

	t.Run("account shows balance and transfers newest first", func(t *testing.T) {
		e.find(t, rich)
		if got := e.text(t, "#balance"); got != "700.00 BRL" {
			t.Errorf("balance = %q, want 700.00 BRL", got)
		}
		if got := e.text(t, "main"); !strings.Contains(got, settled.ID) {
			t.Errorf("account page lacks transfer %s", settled.ID)
		}
		e.screenshot(t, "account.png")
	})

	t.Run("deposits page lists who minted what", func(t *testing.T) {
		e.run(t, "open deposits", chromedp.Navigate(e.url+"/deposits"), chromedp.WaitVisible(chromedp.CSS("#deposits")))
		got := e.text(t, "#deposits")
		for _, want := range []string{rich, "1000.00 BRL", s.Minter.Name} {
			if !strings.Contains(got, want) {
				t.Errorf("the deposits page lacks %q:\n%s", want, got)
			}
		}
		e.screenshot(t, "")
	})

	t.Run("DEAD event requeued from the page settles the transfer", func(t *testing.T) {
		// The broker refusing an event for good is what makes it DEAD;
		// here a trigger on the transfers' outbox writes this one key's
		// events as DEAD with the refusal the relay would record, so the
		// test does not wait out twelve attempts.
		trig := "console_dead_" + suffix
		_, err := s.Transfers.DB.Exec(t.Context(), fmt.Sprintf(`
CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.key = '%[2]s' THEN
    NEW.status := 'DEAD'; NEW.attempts := 12; NEW.last_error := 'refused by the broker: MESSAGE_TOO_LARGE';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER %[1]s BEFORE INSERT ON outbox_event FOR EACH ROW EXECUTE FUNCTION %[1]s();`, trig, rich))
		if err != nil {
			t.Fatal(err)
		}
		id := uuid.NewString()
		r, err := s.PostTransfer(t.Context(), id, e2e.TransferRequest{From: rich, To: dest, AmountCents: 1_000, Currency: "BRL"})
		if err != nil || r.Status != http.StatusAccepted {
			t.Fatalf("POST = %v %v", r.Status, err)
		}
		if _, err := s.Transfers.DB.Exec(t.Context(), fmt.Sprintf(`DROP TRIGGER %[1]s ON outbox_event; DROP FUNCTION %[1]s();`, trig)); err != nil {
			t.Fatal(err)
		}
		e.find(t, id)
		if got := e.text(t, "#steps"); !strings.Contains(got, "DEAD in the transfers' outbox") {
			t.Fatalf("journey does not say the event is DEAD:\n%s", got)
		}
		e.screenshot(t, "journey-stuck.png")
		before := requeueAudits(t, s)
		e.run(t, "open the confirmation",
			chromedp.Click(chromedp.CSS(`a.button[href^="/actions/requeue"]`)),
			chromedp.WaitVisible(chromedp.CSS("#confirm")))
		csrf := value(t, e, "csrf", chromedp.Value(chromedp.CSS(`main input[name=csrf]`)))
		e.screenshot(t, "confirm.png")
		e.run(t, "confirm", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS(".message")))
		if got := e.text(t, ".message"); !strings.Contains(got, "requeued") || strings.Contains(got, "Nothing") {
			t.Fatalf("after confirming: %q", got)
		}
		poll.Until(t, 30*time.Second, "the requeued transfer settles", func() (bool, string) {
			tr := s.Transfer(t, id)
			return tr.Status == "LIQUIDADA", tr.Status
		})
		e.find(t, id)
		if got := e.text(t, "#status"); got != "LIQUIDADA" {
			t.Errorf("status after requeue = %q, want LIQUIDADA", got)
		}
		if got := requeueAudits(t, s); got != before+1 {
			t.Errorf("requeue audit rows = %d, want %d", got, before+1)
		}
		if !strings.Contains(logs.String(), `"action":"console.requeue","client":"ana"`) {
			t.Errorf("no audit line of the console naming the operator:\n%s", logs.String())
		}

		// The same form sent again (an old CSRF token, or the second
		// click of a double click) changes nothing.
		c := e.httpClient(t, true)
		status, body := postForm(t, c, e.url+"/actions/requeue", url.Values{"csrf": {csrf}, "service": {"transfers"}, "id": {id}})
		if status != http.StatusForbidden || !strings.Contains(body, "already submitted") {
			t.Errorf("replayed form = %d, want 403 saying it was already submitted", status)
		}
		if got := requeueAudits(t, s); got != before+1 {
			t.Errorf("a replayed form was applied: %d audit rows, want %d", got, before+1)
		}
	})

	t.Run("DLT record replayed once from the page", func(t *testing.T) {
		// A record the ledger cannot read is poison: it dead-letters it at
		// once (analisada-dlt), and a replay of it is dead-lettered again,
		// so each replay that happened leaves one record on analisada
		// marked dlt-replayed-at.
		key := "POISON-" + suffix
		w := kafkatest.NewWriter(t, broker.Config{Brokers: s.Brokers})
		defer w.Close()
		if err := w.WriteMessages(t.Context(), kafka.Message{Topic: s.Topics.Analysed, Key: []byte(key), Value: []byte("{not json"),
			Headers: []kafka.Header{{Key: events.HeaderEventType, Value: []byte("TransferenciaAnalisada")}}}); err != nil {
			t.Fatal(err)
		}
		dltTopic := events.DLT(s.Topics.Analysed)
		keyed := func(topic string, replayed bool) int {
			msgs, err := s.ReadTopic(t.Context(), topic)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range msgs {
				if string(m.Key) == key && (kafkatest.Header(m, dlt.HeaderReplayed) != "") == replayed {
					n++
				}
			}
			return n
		}
		poll.Until(t, 30*time.Second, "the poison record on the DLT", func() (bool, string) {
			n := keyed(dltTopic, false)
			return n == 1, fmt.Sprintf("%d records", n)
		})
		// The console samples /metrics: the ledger's consumer groups show
		// with their lag, and the charts are drawn.
		poll.Until(t, 30*time.Second, "the ledger's consumer lag on the Backlogs page", func() (bool, string) {
			e.run(t, "open backlogs", chromedp.Navigate(e.url+"/backlogs"), chromedp.WaitVisible(chromedp.CSS("a.replay")))
			got := e.text(t, "#backlog-ledger")
			return strings.Contains(got, s.Groups.Ledger) && strings.Contains(got, "Consumer lag"), got
		})
		if got := e.text(t, "#backlog-ledger"); !strings.Contains(got, dltTopic) || !strings.Contains(got, key) {
			t.Errorf("the ledger's backlog does not show the DLT record:\n%s", got)
		}
		charts := value(t, e, "charts", chromedp.Evaluate[int](`document.querySelectorAll('#backlog-ledger svg.chart polyline[points]').length`))
		if charts != 3 {
			t.Errorf("%d charts on the ledger's backlog, want 3", charts)
		}
		e.screenshot(t, "backlogs.png")
		e.run(t, "confirm the replay", chromedp.Click(chromedp.CSS("a.replay")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
		csrf := value(t, e, "csrf", chromedp.Value(chromedp.CSS(`main input[name=csrf]`)))
		e.screenshot(t, "replay.png")
		if got := e.text(t, "#target"); got != s.Topics.Analysed {
			t.Errorf("the confirmation page names %q as the target, want %s", got, s.Topics.Analysed)
		}
		// A double click sends the form twice: the second is refused.
		e.run(t, "double-click replay", chromedp.DoubleClick(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS(".message")))
		poll.Until(t, 30*time.Second, "the replayed record dead-lettered again", func() (bool, string) {
			n := keyed(dltTopic, true)
			return n >= 1, fmt.Sprintf("%d replayed records on the DLT", n)
		})
		if got := keyed(s.Topics.Analysed, true); got != 1 {
			t.Errorf("%d replayed records on %s, want 1 (a double click replays once)", got, s.Topics.Analysed)
		}
		c := e.httpClient(t, true)
		status, _ := postForm(t, c, e.url+"/actions/replay", url.Values{"csrf": {csrf}, "service": {"ledger"},
			"topic": {dltTopic}, "partition": {"0"}, "offset": {"0"}})
		if status != http.StatusForbidden {
			t.Errorf("replay with a spent CSRF token = %d, want 403", status)
		}
		if got := keyed(s.Topics.Analysed, true); got != 1 {
			t.Errorf("%d replayed records on %s after a stale form, want 1", got, s.Topics.Analysed)
		}
	})

	t.Run("held result applied only to the transfer the ledger settled", func(t *testing.T) {
		// Two transfers settle; a failover then loses their rows (here a
		// DELETE) and a result arrives for each, which the projection
		// holds. The clients retry with the same keys: one with the body
		// the ledger settled, one with another amount.
		same, other := transfer(t, s, rich, dest, 2_000), transfer(t, s, rich, dest, 3_000)
		if same.Status != "LIQUIDADA" || other.Status != "LIQUIDADA" {
			t.Fatalf("transfers = %s, %s; want LIQUIDADA", same.Status, other.Status)
		}
		// The results name the request each was decided for, as the
		// ledger's do.
		requests := map[string]uuid.UUID{}
		for _, id := range []string{same.ID, other.ID} {
			var req uuid.UUID
			if err := s.Transfers.DB.QueryRow(t.Context(), `SELECT evento_solicitacao_id FROM transferencia WHERE id = $1`, id).Scan(&req); err != nil {
				t.Fatal(err)
			}
			requests[id] = req
		}
		if _, err := s.Transfers.DB.Exec(t.Context(), `DELETE FROM transferencia WHERE id = ANY($1::uuid[])`, []string{same.ID, other.ID}); err != nil {
			t.Fatal(err)
		}
		// Results carry the event id derived for their transfer: the
		// projection's inbox marks of the real ones go too, as a restore
		// from an older backup would lose them.
		evSame, evOther := events.DerivedID(events.KindSettled, uuid.MustParse(same.ID)), events.DerivedID(events.KindSettled, uuid.MustParse(other.ID))
		if _, err := s.Transfers.DB.Exec(t.Context(), `DELETE FROM inbox_event WHERE event_id = ANY($1::uuid[])`, []uuid.UUID{evSame, evOther}); err != nil {
			t.Fatal(err)
		}
		w := kafkatest.NewWriter(t, broker.Config{Brokers: s.Brokers})
		defer w.Close()
		for id, ev := range map[string]uuid.UUID{same.ID: evSame, other.ID: evOther} {
			b, err := json.Marshal(events.Settled{EventID: ev, TransferID: uuid.MustParse(id), OccurredAt: time.Now().UTC(), RequestEventID: requests[id]})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteMessages(t.Context(), kafka.Message{Topic: s.Topics.Settled, Key: []byte(rich), Value: b,
				Headers: []kafka.Header{{Key: events.HeaderEventType, Value: []byte(events.TypeSettled)}}}); err != nil {
				t.Fatal(err)
			}
		}
		poll.Until(t, 30*time.Second, "both results held", func() (bool, string) {
			var n int
			if err := s.Transfers.DB.QueryRow(t.Context(), `SELECT count(*) FROM resultado_retido WHERE evento_id = ANY($1::uuid[])`,
				[]string{evSame.String(), evOther.String()}).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 2, fmt.Sprintf("%d held", n)
		})
		for id, cents := range map[string]int64{same.ID: 2_000, other.ID: 9_999} {
			r, err := s.PostTransfer(t.Context(), id, e2e.TransferRequest{From: rich, To: dest, AmountCents: cents, Currency: "BRL"})
			if err != nil || r.Status != http.StatusAccepted {
				t.Fatalf("retry POST = %v %v", r.Status, err)
			}
		}
		e.run(t, "open held results", chromedp.Navigate(e.url+"/held"), chromedp.WaitVisible(chromedp.CSS("#held")))
		if got := e.text(t, "#held-"+evSame.String()+" .check"); got != "same transfer" {
			t.Errorf("check of the same transfer = %q", got)
		}
		if got := e.text(t, "#held-"+evOther.String()+" .check"); !strings.Contains(got, "amount: 9999 here, 3000 in the ledger") {
			t.Errorf("check of the other transfer = %q, want the amounts named", got)
		}
		applies := value(t, e, "apply links", chromedp.Evaluate[int](`document.querySelectorAll('#held-`+evOther.String()+` a.apply').length`))
		if applies != 0 {
			t.Errorf("the other transfer's row offers Apply")
		}
		e.screenshot(t, "held.png")

		e.run(t, "apply", chromedp.Click(chromedp.CSS(`#held-`+evSame.String()+` a.apply`)), chromedp.WaitVisible(chromedp.CSS("#confirm")))
		if got := e.text(t, "#ledger-record"); !strings.Contains(got, "20.00 BRL") {
			t.Errorf("confirmation's ledger record = %q", got)
		}
		e.run(t, "confirm apply", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS(".message")))
		if got := e.text(t, ".message"); !strings.Contains(got, "applied") {
			t.Fatalf("after applying: %q", got)
		}
		if st := s.Transfer(t, same.ID).Status; st != "LIQUIDADA" {
			t.Errorf("the retried transfer is %s after the apply, want LIQUIDADA", st)
		}

		// Applying the other one is refused by the page and, with a form
		// forged from a discard page's CSRF token, by the transfers
		// service, which compares the ledger's own record: it stays
		// PENDENTE and held.
		e.run(t, "apply the other", chromedp.Navigate(e.url+"/actions/held?do=apply&id="+evOther.String()), chromedp.WaitVisible(chromedp.CSS(".message")))
		if got := e.text(t, ".message"); !strings.Contains(got, "cannot be applied") {
			t.Errorf("apply page of the other transfer: %q", got)
		}
		e.run(t, "discard page", chromedp.Navigate(e.url+"/actions/held?do=discard&id="+evOther.String()), chromedp.WaitVisible(chromedp.CSS("#confirm")))
		csrf := value(t, e, "csrf", chromedp.Value(chromedp.CSS(`main input[name=csrf]`)))
		status, body := postForm(t, e.httpClient(t, true), e.url+"/actions/held-apply", url.Values{"csrf": {csrf}, "id": {evOther.String()}})
		if status != http.StatusConflict || !strings.Contains(body, "valorEmCentavos") {
			t.Errorf("forged apply of the other = %d, want 409 naming valorEmCentavos:\n%s", status, body)
		}
		if st := s.Transfer(t, other.ID).Status; st != "PENDENTE" {
			t.Errorf("the transfer of another amount is %s, want PENDENTE", st)
		}
		e.run(t, "discard page again", chromedp.Navigate(e.url+"/actions/held?do=discard&id="+evOther.String()), chromedp.WaitVisible(chromedp.CSS("#confirm")))
		e.run(t, "confirm discard", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS(".message")))
		if got := e.text(t, ".message"); !strings.Contains(got, "discarded") {
			t.Errorf("after discarding: %q", got)
		}
		e.run(t, "held results again", chromedp.Navigate(e.url+"/held"), chromedp.WaitVisible(chromedp.CSS("#held-none")))
		for _, action := range []string{"console.held_apply", "console.held_discard"} {
			if !strings.Contains(logs.String(), `"action":"`+action+`","client":"ana"`) {
				t.Errorf("no %s audit line naming the operator", action)
			}
		}
	})

	t.Run("no session or a bad CSRF token changes nothing", func(t *testing.T) {
		before := requeueAudits(t, s)
		ev := uuid.NewString()
		for _, tc := range []struct {
			name    string
			session bool
			csrf    string
			want    int
		}{
			{"no session", false, "x", http.StatusUnauthorized},
			{"bad csrf", true, "forged", http.StatusForbidden},
			{"no csrf", true, "", http.StatusForbidden},
		} {
			status, _ := postForm(t, e.httpClient(t, tc.session), e.url+"/actions/requeue",
				url.Values{"csrf": {tc.csrf}, "service": {"transfers"}, "id": {ev}})
			if status != tc.want {
				t.Errorf("%s: POST = %d, want %d", tc.name, status, tc.want)
			}
		}
		if got := requeueAudits(t, s); got != before {
			t.Errorf("audit rows = %d, want %d (nothing changed)", got, before)
		}
	})

	t.Run("keyboard and labels", func(t *testing.T) {
		// The find field has the focus on load: typing and Enter find.
		e.run(t, "find by keyboard", chromedp.Navigate(e.url+"/find"), chromedp.WaitVisible(chromedp.CSS("#q")),
			chromedp.KeyEvent(settled.ID), chromedp.KeyEvent("\r"))
		poll.Until(t, 30*time.Second, "the journey after Enter", func() (bool, string) {
			ctx, cancel := context.WithTimeout(e.browser, 5*time.Second)
			defer cancel()
			loc, err := chromedp.Run(ctx, chromedp.Location())
			return err == nil && strings.HasSuffix(loc, "/transfers/"+settled.ID), loc
		})
		// Every visible input of every page has a label.
		for _, page := range []string{"/find", "/transfers/" + settled.ID, "/accounts/" + rich, "/backlogs", "/deposits", "/held"} {
			e.run(t, "open "+page, chromedp.Navigate(e.url+page), chromedp.WaitReady(chromedp.CSS("main h1")))
			unlabelled := value(t, e, "labels", chromedp.Evaluate[[]string](`[...document.querySelectorAll('input:not([type=hidden]), textarea, select')].filter(i => i.labels.length === 0).map(i => i.name)`))
			if len(unlabelled) > 0 {
				t.Errorf("%s: inputs without a label: %q", page, unlabelled)
			}
		}
		// A page asked for without a session leads to the sign-in page.
		c := e.httpClient(t, false)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+"/transfers/"+settled.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
			t.Errorf("GET without a session = %d to %q, want 303 to /signin", resp.StatusCode, resp.Header.Get("Location"))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
			t.Errorf("Content-Security-Policy = %q, want default-src 'none' and no script source", csp)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		e.find(t, `<script>alert(1)</script>`)
		if got := e.text(t, "#find-error"); !strings.Contains(got, `"<script>alert(1)</script>"`) {
			t.Errorf("error = %q, want the input shown as text", got)
		}
		scripts := value(t, e, "count scripts", chromedp.Evaluate[int](`document.querySelectorAll('script').length`))
		if scripts != 0 {
			t.Errorf("%d script elements on the page, want none", scripts)
		}
		e.screenshot(t, "")
		unknown := uuid.NewString()
		e.find(t, unknown)
		if got := e.text(t, "#find-error"); !strings.Contains(got, "No transfer has the id "+unknown) {
			t.Errorf("unknown id: %q", got)
		}
		e.run(t, "malformed id", chromedp.Navigate(e.url+"/transfers/not-a-uuid"), chromedp.WaitVisible(chromedp.CSS("#find-error")))
		if got := e.text(t, "#find-error"); !strings.Contains(got, "is not a transfer id") {
			t.Errorf("malformed id: %q", got)
		}
		e.find(t, "NOPE-"+suffix)
		if got := e.text(t, "#find-error"); !strings.Contains(got, "No account has the id") {
			t.Errorf("unknown account: %q", got)
		}
	})

	t.Run("phone width", func(t *testing.T) {
		e.run(t, "phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/transfers/"+settled.ID),
			chromedp.WaitVisible(chromedp.CSS("#steps")))
		overflow := value(t, e, "overflow", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		if overflow {
			t.Errorf("the journey page scrolls sideways at 390 px")
		}
		e.screenshot(t, "journey-phone.png")
	})
	t.Run("a service down is named and the rest renders", func(t *testing.T) {
		s.Ledger.Stop()
		// Last: a restarted ledger listens on another port than the
		// console was given.
		defer s.Ledger.Start()
		e.find(t, settled.ID)
		if got := e.text(t, ".down"); !strings.Contains(got, "ledger is unavailable") {
			t.Errorf("banner = %q, want it to name the ledger", got)
		}
		steps := e.text(t, "#steps")
		for _, w := range []string{"Request accepted", "Antifraud decision", "ledger is unavailable: this step cannot be shown now"} {
			if !strings.Contains(steps, w) {
				t.Errorf("steps lack %q:\n%s", w, steps)
			}
		}
		e.screenshot(t, "")
	})

}
