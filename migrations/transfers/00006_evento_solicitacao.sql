-- +goose Up
-- The binding of a result to the request it was decided for
-- (docs/api.md, "Event payloads": eventoSolicitacaoId). The transfer keeps
-- the eventoId of the TransferenciaSolicitada written with it; antifraud and
-- the ledger copy it into their results; the projection applies a result
-- only to the transfer with that request event. NULL for transfers created
-- before it was recorded: results for those apply as before.
ALTER TABLE transferencia ADD COLUMN evento_solicitacao_id UUID;

-- A held result keeps the binding it carried (NULL: the record had none),
-- so that the projection's re-apply task can tell when the transfer it was
-- decided for has become visible.
ALTER TABLE resultado_retido ADD COLUMN evento_solicitacao_id UUID;

-- +goose Down
ALTER TABLE resultado_retido DROP COLUMN evento_solicitacao_id;
ALTER TABLE transferencia DROP COLUMN evento_solicitacao_id;
