-- +goose Up
-- The operator console lists an account's transfers, newest first, in
-- pages (GET /ops/contas/{id}/transferencias): one index per side.
CREATE INDEX transferencia_origem_recentes ON transferencia (conta_origem, criada_em DESC, id DESC);
CREATE INDEX transferencia_destino_recentes ON transferencia (conta_destino, criada_em DESC, id DESC);

-- +goose Down
DROP INDEX transferencia_destino_recentes;
DROP INDEX transferencia_origem_recentes;
