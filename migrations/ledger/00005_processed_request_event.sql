-- +goose Up
-- The eventoSolicitacaoId of the analysed record a transfer was decided
-- on: the id of the request event the result answers. The transfers
-- service compares it with the held result it applies (an operator's
-- apply reads the ledger's record, GET /ops/liquidacoes/{id}). NULL for
-- transfers decided before it was kept, or from records that carried
-- none.
ALTER TABLE processed_transfer ADD COLUMN request_event_id UUID;

-- +goose Down
ALTER TABLE processed_transfer DROP COLUMN request_event_id;
