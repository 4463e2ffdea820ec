-- +goose Up
-- Results (TransferenciaLiquidada, TransferenciaRejeitada) for a transfer
-- this database does not have: a transfer lost by a failover that dropped
-- acknowledged commits, a restore from backup, a bug. The projection keeps
-- each here, in the transaction that marks its event in the inbox, instead
-- of dropping it. Results carry no amount, so one is applied to a transfer
-- created later with that id only once an operator has seen that it is the
-- transfer the ledger settled (same accounts, amount and currency): see
-- docs/design/architecture.md, "Results for unknown transfers".
CREATE TABLE resultado_retido (
    evento_id        UUID         PRIMARY KEY,
    -- evento-tipo: TransferenciaLiquidada or TransferenciaRejeitada.
    tipo             VARCHAR(64)  NOT NULL,
    transferencia_id UUID         NOT NULL,
    status           VARCHAR(20)  NOT NULL CHECK (status IN ('LIQUIDADA', 'REJEITADA')),
    motivo           VARCHAR(255) CHECK ((status = 'REJEITADA') = (motivo IS NOT NULL)),
    -- The record's value as received, byte for byte (JSON the projection
    -- decoded; text, not jsonb, so that no value Go accepts is refused here).
    payload          TEXT         NOT NULL,
    recebido_em      TIMESTAMPTZ  NOT NULL DEFAULT now(),
    -- NULL while held; APLICADO once projected onto the transfer,
    -- DESCARTADO when an operator dropped it.
    resolucao        VARCHAR(20)  CHECK (resolucao IN ('APLICADO', 'DESCARTADO')),
    resolvido_em     TIMESTAMPTZ,
    -- The operator (the token's sub) who resolved it, and why.
    resolvido_por    TEXT,
    motivo_resolucao VARCHAR(200),
    CONSTRAINT resultado_retido_resolvido CHECK ((resolucao IS NULL) = (resolvido_em IS NULL))
);

-- The held ones, oldest first (the console's list, the gauge).
CREATE INDEX resultado_retido_pendentes ON resultado_retido (recebido_em, evento_id) WHERE resolucao IS NULL;
CREATE INDEX resultado_retido_transferencia ON resultado_retido (transferencia_id);

-- +goose Down
DROP TABLE resultado_retido;
