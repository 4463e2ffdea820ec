package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
)

// MaxBodyBytes is the largest request body the suite accepts (64 KiB).
const MaxBodyBytes = 64 << 10

// ReadJSONBody checks the Content-Type and reads at most MaxBodyBytes of the
// body. It returns errkind.UnsupportedMedia, errkind.TooLarge, errkind.Timeout (the
// client stalled past the server's read deadline) or errkind.Malformed errors.
func ReadJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if !isJSON(r.Header.Values("Content-Type")) {
		return nil, errkind.Errorf(errkind.UnsupportedMedia, "Content-Type must be application/json, with no charset or charset=utf-8")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, errkind.Errorf(errkind.TooLarge, "request body is larger than %d bytes", MaxBodyBytes)
		}
		if isTimeout(err) {
			return nil, errkind.Errorf(errkind.Timeout, "the request body did not arrive in time")
		}
		return nil, errkind.Errorf(errkind.Malformed, "cannot read request body")
	}
	return body, nil
}

// isJSON accepts exactly one Content-Type, application/json, with no
// parameter but charset=utf-8: a "+json" type or another charset is a
// different contract that the suite does not read.
func isJSON(values []string) bool {
	if len(values) != 1 {
		return false
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// isTimeout reports a read that hit its deadline: the server's ReadTimeout
// while the client stalled in the middle of its body.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Field-error caps: the error of a body with many unknown or duplicate
// fields stays about as small as that body, whatever it holds.
const (
	maxFieldErrors   = 10
	maxFieldNameSize = 64
)

// DecodeStrict decodes one JSON object from body into dst (a pointer to a
// struct) and rejects duplicate keys at any depth (a proxy reading the first
// of two values must see what the service reads), unknown fields, wrong
// types (a number with a fraction or a string where an integer goes, an
// out-of-range number), null for non-pointer fields, and trailing data. A number
// whose value is an integer is one however it is written (2245, 2245.0,
// 2.245e3), as JSON Schema's integer says. Errors are *errkind.Error of
// errkind.Malformed with at most maxFieldErrors field errors.
func DecodeStrict(body []byte, dst any) error {
	body = plainIntegers(body)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return errkind.Errorf(errkind.Malformed, "body must be one JSON object")
	}
	if dups := duplicateKeys(body); len(dups) > 0 {
		fields := make([]errkind.FieldError, len(dups))
		for i, d := range dups {
			fields[i] = errkind.FieldError{Field: d, Message: "duplicate key"}
		}
		return fieldsError("the body repeats a key", fields)
	}
	known := jsonFields(dst)
	var fields []errkind.FieldError
	for name, v := range raw {
		kind, ok := known[name]
		if !ok {
			fields = append(fields, errkind.FieldError{Field: name, Message: "unknown field"})
			continue
		}
		if kind != reflect.Pointer && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			fields = append(fields, errkind.FieldError{Field: name, Message: "must not be null"})
		}
	}
	if len(fields) == 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) && typeErr.Field != "" {
				fields = append(fields, errkind.FieldError{Field: typeErr.Field, Message: "must be " + describe(typeErr.Type)})
			} else {
				return errkind.Errorf(errkind.Malformed, "body is not valid JSON")
			}
		} else if dec.More() {
			return errkind.Errorf(errkind.Malformed, "body must hold exactly one JSON object")
		}
	}
	if len(fields) > 0 {
		return fieldsError("the body does not match the expected fields and types", fields)
	}
	return nil
}

// fieldsError sorts fields and keeps the first maxFieldErrors, each name cut
// to maxFieldNameSize bytes; the detail says how many were left out.
func fieldsError(detail string, fields []errkind.FieldError) *errkind.Error {
	sort.Slice(fields, func(i, j int) bool { return fields[i].Field < fields[j].Field })
	if n := len(fields) - maxFieldErrors; n > 0 {
		fields = fields[:maxFieldErrors]
		detail = fmt.Sprintf("%s (%d more field errors not listed)", detail, n)
	}
	for i := range fields {
		fields[i].Field = truncate(fields[i].Field, maxFieldNameSize)
	}
	return &errkind.Error{Kind: errkind.Malformed, Detail: detail, Fields: fields}
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence,
// marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "") + "..."
}

// duplicateKeys returns the keys that appear twice in one object of body
// (valid JSON), at any depth, as dotted paths ("a.b", "a[].b"); at most
// maxFieldErrors+1 of them, enough to report the cap.
func duplicateKeys(body []byte) []string {
	type frame struct {
		seen map[string]bool // nil for an array
		path string
		key  bool // in an object, the next token is a key
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var (
		stack []*frame
		dups  []string
		last  string // the path of the last key read
	)
	for len(dups) <= maxFieldErrors {
		tok, err := dec.Token()
		if err != nil {
			return dups // io.EOF, or malformed JSON that the caller reports
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.seen != nil && top.key {
			last = joinPath(top.path, k)
			if top.seen[k] {
				dups = append(dups, last)
			}
			top.seen[k] = true
			top.key = false
			continue
		}
		path := last
		switch {
		case top == nil:
			path = ""
		case top.seen == nil:
			path = top.path + "[]"
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{seen: map[string]bool{}, path: path, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{path: path})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended; in an object, a key comes next.
		if len(stack) > 0 && stack[len(stack)-1].seen != nil {
			stack[len(stack)-1].key = true
		}
	}
	return dups
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// jsonFields returns the JSON names of dst's struct fields and their kinds.
func jsonFields(dst any) map[string]reflect.Kind {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]reflect.Kind{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type.Kind()
	}
	return out
}

func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer that fits in %s", t.Kind())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	default:
		return "of type " + t.String()
	}
}

// HeaderIdempotencyKey is the header of the idempotency protocol (IETF
// draft "The Idempotency-Key HTTP Header Field").
const HeaderIdempotencyKey = "Idempotency-Key"

// IdempotencyKey returns the request's one Idempotency-Key as a UUID. The
// suite's one rule, for every service: exactly one header, holding the
// canonical 36-character hyphenated form of a non-nil UUID (the form Java's
// UUID.toString writes), in either case. Two headers, braces, "urn:uuid:"
// or 32 bare hex digits are an errkind.InvalidKey error: a key is also the id of
// what it creates, so it has one spelling.
func IdempotencyKey(r *http.Request) (uuid.UUID, error) {
	values := r.Header.Values(HeaderIdempotencyKey)
	if len(values) > 1 {
		return uuid.Nil, errkind.Errorf(errkind.InvalidKey, "send exactly one %s header", HeaderIdempotencyKey)
	}
	if len(values) == 0 {
		return uuid.Nil, errkind.Errorf(errkind.InvalidKey, "the %s header is required: a UUID", HeaderIdempotencyKey)
	}
	id, ok := ParseUUID(values[0])
	if !ok {
		return uuid.Nil, errkind.Errorf(errkind.InvalidKey, "the %s header must be a UUID in its canonical 36-character form", HeaderIdempotencyKey)
	}
	return id, nil
}

// ParseUUID accepts only the canonical 36-character hyphenated form of a
// non-nil UUID, in either case.
func ParseUUID(s string) (uuid.UUID, bool) {
	if len(s) != 36 {
		return uuid.Nil, false
	}
	id, err := uuid.Parse(s)
	if err != nil || id == uuid.Nil {
		return uuid.Nil, false
	}
	return id, true
}

// PathUUID returns the route parameter name as a canonical UUID (see
// ParseUUID); what names it in the problem ("transfer id").
func PathUUID(r *http.Request, name, what string) (uuid.UUID, error) {
	raw, err := PathParam(r, name)
	if err != nil {
		return uuid.Nil, err
	}
	id, ok := ParseUUID(raw)
	if !ok {
		return uuid.Nil, errkind.Errorf(errkind.InvalidID, "the %s must be a UUID", what)
	}
	return id, nil
}

// PathParam returns the decoded value of the route parameter name. The
// suite's routers match on the escaped path (NewRouter), so "/contas/%43C-001"
// and "/contas/CC-001" name the same account, and an escaped "/" stays
// inside its segment. A value that is not valid percent-encoding is a
// errkind.InvalidID error.
func PathParam(r *http.Request, name string) (string, error) {
	v, err := url.PathUnescape(chi.URLParam(r, name))
	if err != nil {
		return "", errkind.Errorf(errkind.InvalidID, "the %s in the path is not valid percent-encoding", name)
	}
	return v, nil
}
