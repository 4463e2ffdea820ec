package httpapi

import (
	"net/http"

	"github.com/paysuite/payments/pkg/errkind"
)

// SearchParam returns the value of r's query-string (URL search)
// parameter name and whether it was given (an empty value is given). A parameter given more than once is
// a errkind.Malformed error: which of its values counts would be a guess, and a
// proxy could guess otherwise.
func SearchParam(r *http.Request, name string) (string, bool, error) {
	values, ok := r.URL.Query()[name]
	switch {
	case !ok:
		return "", false, nil
	case len(values) > 1:
		return "", true, &errkind.Error{Kind: errkind.Malformed, Detail: "invalid query parameter",
			Fields: []errkind.FieldError{{Field: name, Message: "must be given at most once"}}}
	}
	return values[0], true, nil
}

// FirstSearchParam returns the first value of r's query-string parameter
// name, or "" when it is not given (url.Values.Get): for the routes that
// take the first of repeated values rather than refuse them (SearchParam).
func FirstSearchParam(r *http.Request, name string) string {
	return r.URL.Query().Get(name)
}
