package httpapi

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// maxExponent bounds the exponent of a number plainIntegers rewrites: past
// it the value is no int64 (or is 0 only by a mantissa of as many digits),
// and big.Rat would build a number of that many digits.
const maxExponent = 400

// plainIntegers returns body with every number whose value is an integer
// but that is written with a fraction or an exponent (2245.0, 2.245e3)
// rewritten in its plain form (2245), so that it decodes into an integer
// field: JSON Schema's integer, the type the OpenAPI documents give
// amounts, admits them. A number with a non-zero fraction stays as it is and
// fails to decode into an integer. Malformed JSON is returned unchanged up
// to the fault, for the caller to refuse.
func plainIntegers(body []byte) []byte {
	if !mayHoldFloat(body) {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var out []byte
	last := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		n, ok := tok.(json.Number)
		if !ok || !strings.ContainsAny(string(n), ".eE") {
			continue
		}
		plain, ok := integral(string(n))
		if !ok {
			continue
		}
		// After a token, InputOffset is the end of its literal.
		end := int(dec.InputOffset())
		start := end - len(n)
		if out == nil {
			out = make([]byte, 0, len(body))
		}
		out = append(out, body[last:start]...)
		out = append(out, plain...)
		last = end
	}
	if out == nil {
		return body
	}
	return append(out, body[last:]...)
}

// mayHoldFloat reports whether body has a digit followed by '.', 'e' or
// 'E': the cheap test that spares most bodies a second tokenizing pass.
func mayHoldFloat(body []byte) bool {
	for i := 0; i+1 < len(body); i++ {
		if body[i] >= '0' && body[i] <= '9' {
			switch body[i+1] {
			case '.', 'e', 'E':
				return true
			}
		}
	}
	return false
}

// integral returns the JSON number literal s in plain integer form if its
// value is an integer.
func integral(s string) (string, bool) {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > maxExponent || exp < -maxExponent {
			return "", false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return "", false
	}
	return r.Num().String(), true
}
