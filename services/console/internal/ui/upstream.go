package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Upstream is one service the console reads, by its base URL.
type Upstream struct {
	// Name is how pages name the service ("ledger").
	Name string
	// URL is the base URL, e.g. http://localhost:8081.
	URL string
}

// Errors of an upstream call.
var (
	// errNotFound: the service answered 404.
	errNotFound = errors.New("not found")
	// errSignedOut: the service refused the operator's token (401), e.g.
	// it expired: the console signs the operator out.
	errSignedOut = errors.New("the token was refused")
)

// downError says a service could not answer (unreachable, timed out, 5xx
// or an answer the console cannot read): pages name the service and
// render the rest.
type downError struct {
	Service string
	Cause   string
}

func (e *downError) Error() string { return e.Service + " is unavailable: " + e.Cause }

// problemError is a 4xx problem other than 401 and 404 (e.g. 400 for a
// malformed id, 403 for a missing scope): its detail is shown.
type problemError struct {
	Service string
	Status  int
	Detail  string
}

func (e *problemError) Error() string {
	return fmt.Sprintf("%s answered %d: %s", e.Service, e.Status, e.Detail)
}

// client calls upstreams with the operator's token.
type client struct {
	http *http.Client
}

func newClient() *client {
	return &client{http: &http.Client{Timeout: 5 * time.Second}}
}

// do sends method path to u with token and decodes a 2xx JSON answer
// into out (nil: body ignored).
func (c *client) do(ctx context.Context, u Upstream, token, method, path string, out any) error {
	// The base URL is configuration; path is built by the console from
	// validated ids and escaped segments.
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(u.URL, "/")+path, nil) //nolint:gosec // see above
	if err != nil {
		return &downError{Service: u.Name, Cause: "bad request: " + err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req) //nolint:gosec // see NewRequestWithContext above
	if err != nil {
		cause := "unreachable"
		if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") {
			cause = "timed out"
		}
		return &downError{Service: u.Name, Cause: cause}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return &downError{Service: u.Name, Cause: "answer cut short"}
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errNotFound
	case resp.StatusCode == http.StatusUnauthorized:
		return errSignedOut
	case resp.StatusCode >= 500:
		return &downError{Service: u.Name, Cause: fmt.Sprintf("answered %d", resp.StatusCode)}
	case resp.StatusCode >= 400:
		var p struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(body, &p)
		return &problemError{Service: u.Name, Status: resp.StatusCode, Detail: p.Detail}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &downError{Service: u.Name, Cause: "unreadable answer"}
	}
	return nil
}
