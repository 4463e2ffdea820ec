// Package apiclient speaks HTTP to the services' APIs the way their callers
// must: a JSON body, an Idempotency-Key where the route takes one, and a
// bearer token. The scripted demo and the cross-service tests use it, so the
// request they make is written once.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// MaxBody bounds how much of an answer's body is read.
const MaxBody = 4 << 20

// Client sends requests with one Authorization. The zero value sends none,
// with http.DefaultClient.
type Client struct {
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
	// Authorization is the header's whole value ("Bearer ..."); empty sends
	// none.
	Authorization string
}

// Bearer returns the Authorization value for token.
func Bearer(token string) string { return "Bearer " + token }

// Response is an HTTP answer, its body read whole (up to MaxBody).
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends one request and reads the answer. body, if not nil, is sent as
// JSON; key, if not empty, as the Idempotency-Key. Errors name the method
// and url; a status of any kind is not an error.
func (c Client) Do(ctx context.Context, method, url, key string, body any) (Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Response{}, fmt.Errorf("%s %s: encode body: %w", method, url, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if c.Authorization != "" {
		req.Header.Set("Authorization", c.Authorization)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}
