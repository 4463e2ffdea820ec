package ui

import "github.com/paysuite/payments/pkg/opsapi"

// The services' /ops answers, as the console reads them (the wire names
// of each service's opsweb package).

type opsTransferPage struct {
	Transferencias []opsapi.OperatorTransfer `json:"transferencias"`
	Proxima        string                    `json:"proxima"`
}

type opsDecision struct {
	Pontuacao  int      `json:"pontuacao"`
	Limiar     int      `json:"limiar"`
	Resultado  string   `json:"resultado"`
	Regras     []string `json:"regras"`
	DecididaEm string   `json:"decididaEm"`
}

type opsNotifications struct {
	Notificacoes []opsNotification `json:"notificacoes"`
}

type opsNotification struct {
	EventoID     string       `json:"eventoId"`
	TipoEvento   string       `json:"tipoEvento"`
	Canal        string       `json:"canal"`
	Status       string       `json:"status"`
	Tentativas   int          `json:"tentativas"`
	EntregueEm   string       `json:"entregueEm"`
	Erro         string       `json:"erro"`
	CriadaEm     string       `json:"criadaEm"`
	AtualizadaEm string       `json:"atualizadaEm"`
	Historico    []opsAttempt `json:"historico"`
}

// opsAttempt is one attempt to notify: the topic is the one the record was
// read from (the main topic or a retry topic).
type opsAttempt struct {
	Tentativa int    `json:"tentativa"`
	Canal     string `json:"canal"`
	Topico    string `json:"topico"`
	Resultado string `json:"resultado"`
	Erro      string `json:"erro"`
	Em        string `json:"em"`
}

type account struct {
	ID      string `json:"id"`
	Moeda   string `json:"moeda"`
	Saldo   int64  `json:"saldoEmCentavos"`
	Titular string `json:"titular"`
}

type postingsPage struct {
	Itens []struct {
		ID              int64  `json:"id"`
		TransferenciaID string `json:"transferenciaId"`
		Tipo            string `json:"tipo"`
		ValorEmCentavos int64  `json:"valorEmCentavos"`
		CriadoEm        string `json:"criadoEm"`
	} `json:"itens"`
	ProximoCursor *string `json:"proximoCursor"`
}
