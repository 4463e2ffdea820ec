package ui

import (
	"net/http"
	"time"
)

// depositsPage is the ledger's GET /ops/depositos.
type depositsPage struct {
	Itens []struct {
		ID              string    `json:"id"`
		ContaID         string    `json:"contaId"`
		Moeda           string    `json:"moeda"`
		ValorEmCentavos int64     `json:"valorEmCentavos"`
		Cliente         string    `json:"cliente"`
		RequestID       string    `json:"requestId"`
		CriadoEm        time.Time `json:"criadoEm"`
	} `json:"itens"`
}

// DepositsPage is the Deposits page: the newest deposits (minting), who
// made each and in which request, or nil when the ledger could not answer.
type DepositsPage struct {
	Deposits *depositsPage
}

// depositsShown is how many deposits the page lists.
const depositsShown = "100"

// deposits renders the newest deposits from the ledger's operator listing.
func (s *Server) deposits(w http.ResponseWriter, r *http.Request, sess *session) {
	f := s.fetcher(r.Context(), sess)
	var data DepositsPage
	fetchInto(f, s.cfg.Ledger, "/ops/depositos?limite="+depositsShown, &data.Deposits)
	down := f.wait()
	if err := f.failure(); err != nil {
		s.upstreamFailed(w, r, sess, err)
		return
	}
	s.render(w, r, sess, http.StatusOK, "deposits", "Deposits", down, data)
}
