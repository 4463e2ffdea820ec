package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"sort"
	"strings"
)

// MaxBodyBytes is the largest request body the suite accepts (64 KiB).
const MaxBodyBytes = 64 << 10

// ReadJSONBody checks the Content-Type and reads at most MaxBodyBytes of the
// body. It returns KindUnsupportedMedia or KindTooLarge errors.
func ReadJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, Errorf(KindUnsupportedMedia, "Content-Type must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, Errorf(KindTooLarge, "request body is larger than %d bytes", MaxBodyBytes)
		}
		return nil, Errorf(KindMalformed, "cannot read request body")
	}
	return body, nil
}

// DecodeStrict decodes one JSON object from body into dst (a pointer to a
// struct) and rejects unknown fields, wrong types (a float or a string where
// an integer goes, an out-of-range number), null for non-pointer fields, and
// trailing data. Errors are *Error of KindMalformed with field errors.
func DecodeStrict(body []byte, dst any) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return Errorf(KindMalformed, "body must be one JSON object")
	}
	known := jsonFields(dst)
	var fields []FieldError
	for name, v := range raw {
		kind, ok := known[name]
		if !ok {
			fields = append(fields, FieldError{Field: name, Message: "unknown field"})
			continue
		}
		if kind != reflect.Pointer && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			fields = append(fields, FieldError{Field: name, Message: "must not be null"})
		}
	}
	if len(fields) == 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) && typeErr.Field != "" {
				fields = append(fields, FieldError{Field: typeErr.Field, Message: "must be " + describe(typeErr.Type)})
			} else {
				return Errorf(KindMalformed, "body is not valid JSON")
			}
		} else if dec.More() {
			return Errorf(KindMalformed, "body must hold exactly one JSON object")
		}
	}
	if len(fields) > 0 {
		sort.Slice(fields, func(i, j int) bool { return fields[i].Field < fields[j].Field })
		return &Error{Kind: KindMalformed, Detail: "the body does not match the expected fields and types", Fields: fields}
	}
	return nil
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
