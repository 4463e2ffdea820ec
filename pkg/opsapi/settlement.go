package opsapi

// PathSettlement is the ledger's record of one transfer, by the transfer's
// id: what it was asked to move, for whom, and what it decided. The
// console's journey and held-results pages read it, and the transfers
// service reads it, with the calling operator's token, before it applies a
// held result.
const PathSettlement = "/ops/liquidacoes/{id}"

// Settlement is the body of GET PathSettlement.
type Settlement struct {
	TransferenciaID string `json:"transferenciaId"`
	// Resultado is LIQUIDADA, REJEITADA or, for a hold, RESERVADA
	// (EM_PROCESSAMENTO is never committed: the marker and the decision
	// share a transaction). A hold's later capture, cancellation or
	// expiry is in Reserva; its capture's postings in Lancamentos.
	Resultado string `json:"resultado"`
	// Motivo is the reason of a rejection.
	Motivo string `json:"motivo,omitempty"`
	// ContaOrigem, ContaDestino, ValorEmCentavos, Moeda and ClienteID are
	// what the TransferenciaAnalisada asked the ledger to move and for
	// whom, as received: results carry no amount, so this is what tells a
	// transfer recreated under the same id from the one decided here.
	ContaOrigem     string `json:"contaOrigem"`
	ContaDestino    string `json:"contaDestino"`
	ValorEmCentavos int64  `json:"valorEmCentavos"`
	Moeda           string `json:"moeda"`
	// ClienteID is the record's clienteId; empty when it named none.
	ClienteID string `json:"clienteId"`
	// EventoSolicitacaoID is the record's eventoSolicitacaoId (the request
	// event the result answers), when the ledger kept it.
	EventoSolicitacaoID string    `json:"eventoSolicitacaoId,omitempty"`
	ProcessadaEm        string    `json:"processadaEm"`
	Lancamentos         []Posting `json:"lancamentos"`
	// Reserva is a hold's reservation (Resultado RESERVADA); absent for
	// any other transfer.
	Reserva *Reservation `json:"reserva,omitempty"`
}

// Reservation states (Reservation.Estado).
const (
	ReservationOpen      = "ABERTA"
	ReservationCaptured  = "CAPTURADA"
	ReservationCancelled = "CANCELADA"
	ReservationExpired   = "EXPIRADA"
)

// Reservation is a hold's reservation on its source account
// (CONTRACTS.md section 9): the amount, until when, and how it closed.
type Reservation struct {
	ValorEmCentavos int64  `json:"valorEmCentavos"`
	ExpiraEm        string `json:"expiraEm"`
	// Estado is ReservationOpen, ReservationCaptured, ReservationCancelled
	// or ReservationExpired.
	Estado string `json:"estado"`
	// ValorCapturadoEmCentavos is what the capture posted (CAPTURADA
	// only); the rest of the reservation was released with it.
	ValorCapturadoEmCentavos int64 `json:"valorCapturadoEmCentavos,omitempty"`
	// EncerradaEm is when the reservation closed; absent while ABERTA.
	EncerradaEm string `json:"encerradaEm,omitempty"`
}

// Posting is one side of a settled transfer with the account's balance
// right after it.
type Posting struct {
	Conta           string `json:"conta"`
	Direcao         string `json:"direcao"`
	ValorEmCentavos int64  `json:"valorEmCentavos"`
	SaldoApos       int64  `json:"saldoAposEmCentavos"`
	CriadoEm        string `json:"criadoEm"`
}
