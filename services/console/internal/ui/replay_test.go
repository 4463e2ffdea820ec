package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestReplayConfirmationShowsTheTarget: the confirmation page names the
// topic the replay goes to (the DLT's main topic) and offers the
// unverified switch; the form sends semVerificacao only when it is ticked,
// and the result names the target the service answered.
func TestReplayConfirmationShowsTheTarget(t *testing.T) {
	t.Parallel()
	const dltTopic, target = "pagamentos.transferencia.liquidada.v1-dlt", "pagamentos.transferencia.liquidada.v1"
	var mu sync.Mutex
	var queries []url.Values
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Query())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"reenviados":1,"destino":"`+target+`","naoVerificados":0}`)
	}))
	t.Cleanup(svc.Close)
	srv, c := consoleOn(t, svc.URL, nil)
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	csrf := func(body string) string {
		t.Helper()
		m := csrfField.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no CSRF field in:\n%s", body)
		}
		return m[1]
	}
	_, page := do(http.MethodGet, "/signin", nil)
	if st, _ := do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(page)}, "token": {"op"}}); st != http.StatusSeeOther {
		t.Fatalf("sign-in = %d, want 303", st)
	}

	confirm := "/actions/replay?" + url.Values{"service": {"notifications"}, "topic": {dltTopic}, "partition": {"0"}, "offset": {"3"}}.Encode()
	for _, unverified := range []bool{false, true} {
		st, page := do(http.MethodGet, confirm, nil)
		if st != http.StatusOK || !strings.Contains(page, `<code id="target">`+target+`</code>`) || !strings.Contains(page, `name="unverified"`) {
			t.Fatalf("confirmation page = %d, want the target %s and the unverified switch:\n%s", st, target, page)
		}
		form := url.Values{"csrf": {csrf(page)}, "service": {"notifications"}, "topic": {dltTopic}, "partition": {"0"}, "offset": {"3"}}
		if unverified {
			form.Set("unverified", "on")
		}
		st, page = do(http.MethodPost, "/actions/replay", form)
		if st != http.StatusOK || !strings.Contains(page, "replayed to "+target) {
			t.Errorf("replay = %d, want a page naming the target:\n%s", st, page)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) != 2 || queries[0].Has("semVerificacao") || queries[1].Get("semVerificacao") != "true" {
		t.Errorf("the service got %v, want one replay without semVerificacao and one with semVerificacao=true", queries)
	}
	// Not a dead-letter topic: refused before any call.
	if st, _ := do(http.MethodGet, "/actions/replay?service=notifications&topic="+target+"&key=CC-1", nil); st != http.StatusBadRequest {
		t.Errorf("confirmation for a main topic = %d, want 400", st)
	}
}
