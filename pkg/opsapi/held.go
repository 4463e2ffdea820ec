package opsapi

import "encoding/json"

// PathHeld is the transfers service's list of held results (settlement
// results whose transfer it did not know); PathHeld + "/{id}" is one, by
// its event id, with "/aplicar" and "/descartar" its two resolutions.
const PathHeld = "/ops/resultados-retidos"

// Held is a held result as operators see it: the body of GET
// PathHeld/{id}, what its resolutions answer, and an item of HeldList.
type Held struct {
	EventoID        string          `json:"eventoId"`
	Tipo            string          `json:"tipo"`
	TransferenciaID string          `json:"transferenciaId"`
	Status          string          `json:"status"`
	Motivo          string          `json:"motivo,omitempty"`
	Payload         json.RawMessage `json:"payload"`
	RecebidoEm      string          `json:"recebidoEm"`
	// Resolucao is APLICADO or DESCARTADO once resolved.
	Resolucao       string `json:"resolucao,omitempty"`
	ResolvidoEm     string `json:"resolvidoEm,omitempty"`
	ResolvidoPor    string `json:"resolvidoPor,omitempty"`
	MotivoResolucao string `json:"motivoResolucao,omitempty"`
	// Transferencia is the transfer with that id now, if one exists.
	Transferencia *OperatorTransfer `json:"transferencia,omitempty"`
}

// HeldList is the body of GET PathHeld.
type HeldList struct {
	Resultados []Held `json:"resultados"`
}
