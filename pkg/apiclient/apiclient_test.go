package apiclient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/apiclient"
)

func TestDoSendsTheContractHeaders(t *testing.T) {
	t.Parallel()
	type seen struct {
		Method, ContentType, Key, Authorization, Body string
	}
	tests := []struct {
		name string
		auth string
		key  string
		body any
		want seen
	}{
		{
			name: "JSON body, key and token",
			auth: apiclient.Bearer("tok"), key: "4bf92f35-77b3-4da6-a3ce-929d0e0e4736", body: map[string]int{"valorEmCentavos": 5},
			want: seen{Method: http.MethodPost, ContentType: "application/json", Key: "4bf92f35-77b3-4da6-a3ce-929d0e0e4736",
				Authorization: "Bearer tok", Body: `{"valorEmCentavos":5}`},
		},
		{
			name: "no body, no key, no token",
			want: seen{Method: http.MethodPost},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan seen, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization"), string(b)}
				w.Header().Set("Idempotent-Replayed", "true")
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{"id":"x"}`))
			}))
			defer srv.Close()
			resp, err := apiclient.Client{Authorization: tt.auth}.Do(context.Background(), http.MethodPost, srv.URL+"/transferencias", tt.key, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, <-got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
			if resp.Status != http.StatusAccepted || string(resp.Body) != `{"id":"x"}` || resp.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("response = %d %q %v", resp.Status, resp.Body, resp.Header)
			}
		})
	}
}
