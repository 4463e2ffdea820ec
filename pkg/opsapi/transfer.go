package opsapi

// Transfer is the fields every view of a transfer shows, in their wire
// order (CONTRACTS.md section 2): the public GET /transferencias/{id}
// body is Transfer then TransferTimes; the operator's is
// OperatorTransfer. Motivo is set only when the transfer is REJEITADA;
// ExpiraEm only on a hold (captura MANUAL), ValorLiquidadoEmCentavos once
// a hold is captured (CONTRACTS.md section 9).
type Transfer struct {
	ID                       string `json:"id"`
	ContaOrigem              string `json:"contaOrigem"`
	ContaDestino             string `json:"contaDestino"`
	ValorEmCentavos          int64  `json:"valorEmCentavos"`
	Moeda                    string `json:"moeda"`
	Status                   string `json:"status"`
	Motivo                   string `json:"motivo,omitempty"`
	Captura                  string `json:"captura,omitempty"`
	ExpiraEm                 string `json:"expiraEm,omitempty"`
	ValorLiquidadoEmCentavos int64  `json:"valorLiquidadoEmCentavos,omitempty"`
	// ValorEstornadoEmCentavos is the sum of its settled refunds; absent
	// while none is settled.
	ValorEstornadoEmCentavos int64 `json:"valorEstornadoEmCentavos,omitempty"`
}

// TransferTimes are when a transfer was created and last changed, as Time
// writes them; they close every view of a transfer.
type TransferTimes struct {
	CriadaEm     string `json:"criadaEm"`
	AtualizadaEm string `json:"atualizadaEm"`
}

// OperatorTransfer is a transfer as operators see it (the transfers
// service's /ops answers, which the console reads): Transfer with the
// client that created it and, when recorded, the id of the request that
// did. The public view carries neither.
type OperatorTransfer struct {
	Transfer
	ClienteID string `json:"clienteId"`
	// RequestID is the id of the request that created it, when recorded.
	RequestID string `json:"requestId,omitempty"`
	TransferTimes
}

// Refund is a refund of a transfer (CONTRACTS.md section 10): the body of
// GET /transferencias/{id}/estornos/{estornoId}, and each item of the
// operators' GET /ops/transferencias/{id}/estornos. Motivo is set only
// when it is REJEITADO.
type Refund struct {
	ID              string `json:"id"`
	TransferenciaID string `json:"transferenciaId"`
	ValorEmCentavos int64  `json:"valorEmCentavos"`
	Status          string `json:"status"`
	Motivo          string `json:"motivo,omitempty"`
	CriadoEm        string `json:"criadoEm"`
	AtualizadoEm    string `json:"atualizadoEm"`
}

// Refunds is the body of GET /ops/transferencias/{id}/estornos: a
// transfer's refunds, oldest first (empty for an unknown transfer).
type Refunds struct {
	Estornos []Refund `json:"estornos"`
}
