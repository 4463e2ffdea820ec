-- +goose Up
-- The client's history (CONTRACTS.md sections 10 and 11).

-- The titular (client id) of the destination account, as the ledger names
-- it in TransferenciaLiquidada (titularDestino): that client may read the
-- transfer and finds it in its listing. NULL until the transfer settles,
-- for results of producers that do not send it, and for accounts without
-- a titular. The ledger's own shape of a titular.
ALTER TABLE transferencia ADD COLUMN titular_destino TEXT
    CONSTRAINT transferencia_titular_destino_shape CHECK (titular_destino <> '' AND length(titular_destino) <= 255);

-- A held settlement keeps the titular it named, for when it is applied.
ALTER TABLE resultado_retido ADD COLUMN titular_destino TEXT
    CONSTRAINT resultado_retido_titular_destino_shape CHECK (titular_destino <> '' AND length(titular_destino) <= 255);

-- GET /transferencias lists newest first, (criada_em, id) descending, with
-- keyset pagination: every branch of its queries (services/transfers/
-- internal/postgres/history.go) is one backward range scan of one of
-- these indexes, bounded by the page's cursor and desde/ate, stopped
-- after a page. Which index serves which filter:
--   - a client's own transfers (what it created), with or without status,
--     desde, ate: transferencia_cliente_historico, one range per status
--     (all of them when status is not given);
--   - the transfers paid into its accounts (titular_destino):
--     transferencia_titular_historico, likewise;
--   - an operator's listing of every client, with or without status, desde,
--     ate: transferencia_historico, likewise;
--   - conta (either side of the transfer), for clients and operators alike:
--     transferencia_origem_recentes and transferencia_destino_recentes
--     (00003), with the status and the client's visibility checked on the
--     rows the scan reads.
-- status is a column of the first three so that a status filter reads
-- only that status's rows; a transfer's status changes once or twice in
-- its life, so these updates are no longer HOT ones (the projection's
-- statement writes the new index entries in its one transaction).
CREATE INDEX transferencia_cliente_historico ON transferencia (cliente_id, status, criada_em, id);
CREATE INDEX transferencia_titular_historico ON transferencia (titular_destino, status, criada_em, id)
    WHERE titular_destino IS NOT NULL;
CREATE INDEX transferencia_historico ON transferencia (status, criada_em, id);

-- +goose Down
DROP INDEX transferencia_historico;
DROP INDEX transferencia_titular_historico;
DROP INDEX transferencia_cliente_historico;
ALTER TABLE resultado_retido DROP COLUMN titular_destino;
ALTER TABLE transferencia DROP COLUMN titular_destino;
