package web_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/validate"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
)

// FuzzDecodeTransferRequest: decoding and validating a POST body never
// panics, fails only with a 400 or 422 problem, and never accepts a body
// whose amount is not a number whose value is an integer of 1..10^15 or whose fields
// break a rule. What it accepts is checked against an independent reading
// of the JSON.
func FuzzDecodeTransferRequest(f *testing.F) {
	for _, seed := range []string{
		validBody,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":1,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":1000000000000000,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":1000000000000001,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":0,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":-5,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":1.5,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":10.0,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":1e3,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":1e16,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":1e999999999,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":"100","moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":9223372036854775808,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":null,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":[1],"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":5,"valorEmCentavos":7,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorCentavos":5,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"A","valorEmCentavos":5,"moeda":"USD"}`,
		`{"contaOrigem":"\u0041","contaDestino":"B","valorEmCentavos":5,"moeda":"usd"}`,
		`{"CONTAORIGEM":"A","contaDestino":"B","valorEmCentavos":5,"moeda":"USD"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":5,"moeda":"USD"} {}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":5,"moeda":"USD","captura":"MANUAL"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":5,"moeda":"USD","captura":"AUTOMATICA","expiraEm":"2030-01-01T00:00:00Z"}`,
		`{"contaOrigem":"A","contaDestino":"B","valorEmCentavos":5,"moeda":"USD","captura":null}`,
		"\xef\xbb\xbf{}",
		`[]`, `null`, `""`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// The POST's path: the decoder, then the rules that Submit checks.
		req, err := web.DecodeRequest(body)
		if err == nil {
			err = req.Validate(time.Now())
		}
		if err != nil {
			var pe *errkind.Error
			var ve *validate.ValidationError
			if !errors.As(err, &ve) && (!errors.As(err, &pe) || pe.Kind != errkind.Malformed) {
				t.Fatalf("DecodeRequest(%q) error %v, want a malformed problem or a validation error", body, err)
			}
			return
		}
		if req.AmountCents < 1 || req.AmountCents > transfer.MaxAmountCents {
			t.Fatalf("DecodeRequest(%q) accepted amount %d", body, req.AmountCents)
		}
		if err := req.Validate(time.Now()); err != nil {
			t.Fatalf("DecodeRequest(%q) accepted %+v that breaks a rule: %v", body, req, err)
		}
		// An independent reading: one JSON object with exactly the four
		// fields (and captura, expiraEm when sent), the amount a number whose exact value is the integer
		// accepted.
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("DecodeRequest(%q) accepted a body that is not a JSON object: %v", body, err)
		}
		want := 4
		for field, v := range map[string]string{"captura": req.Capture, "expiraEm": req.ExpiresAt} {
			if got, ok := raw[field]; ok {
				if got != v {
					t.Fatalf("DecodeRequest(%q) %s = %q, the JSON says %v", body, field, v, got)
				}
				want++
			}
		}
		if len(raw) != want {
			t.Fatalf("DecodeRequest(%q) accepted %d fields, want %d", body, len(raw), want)
		}
		n, ok := raw["valorEmCentavos"].(json.Number)
		if !ok {
			t.Fatalf("DecodeRequest(%q) accepted amount %v", body, raw["valorEmCentavos"])
		}
		v, ok := new(big.Rat).SetString(n.String())
		if !ok || !v.IsInt() || v.Cmp(new(big.Rat).SetInt64(req.AmountCents)) != 0 {
			t.Fatalf("DecodeRequest(%q) amount %d, literal says %s", body, req.AmountCents, n)
		}
		if raw["contaOrigem"] != req.Source || raw["contaDestino"] != req.Destination || raw["moeda"] != req.Currency {
			t.Fatalf("DecodeRequest(%q) = %+v, the JSON says %v", body, req, raw)
		}
	})
}
