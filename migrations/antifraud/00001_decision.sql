-- +goose Up
-- One row per transfer antifraud decided: the audit trail of every decision,
-- the service's idempotency record (a transfer is decided once; a redelivered
-- request finds its row and changes nothing), and the history the velocity
-- rules read.
CREATE TABLE decision (
    transfer_id      UUID        PRIMARY KEY,
    -- eventoId of the TransferenciaSolicitada that was decided.
    request_event_id UUID        NOT NULL,
    source_account   TEXT        NOT NULL,
    dest_account     TEXT        NOT NULL,
    amount_cents     BIGINT      NOT NULL CHECK (amount_cents > 0),
    currency         TEXT        NOT NULL,
    -- When the transfer was requested (ocorridoEm): velocity windows are
    -- measured on it, so a backlog processed late is judged as it happened.
    occurred_at      TIMESTAMPTZ NOT NULL,
    score            INT         NOT NULL CHECK (score BETWEEN 0 AND 100),
    -- The threshold the score was compared with, for the audit trail.
    threshold        INT         NOT NULL CHECK (threshold BETWEEN 1 AND 100),
    outcome          TEXT        NOT NULL CHECK (outcome IN ('APPROVED', 'BLOCKED')),
    -- Names of the rules that fired, in rule order: the explanation.
    rules            TEXT[]      NOT NULL DEFAULT '{}',
    -- Id of the event emitted (TransferenciaAnalisada or
    -- TransferenciaRejeitada), derived from the transfer id.
    event_id         UUID        NOT NULL UNIQUE,
    decided_at       TIMESTAMPTZ NOT NULL
);

-- The velocity rules sum the approved transfers of one source account since
-- a point in time: an index-only scan of this partial index.
CREATE INDEX decision_velocity ON decision (source_account, occurred_at)
    INCLUDE (amount_cents) WHERE outcome = 'APPROVED';

-- Operators look decisions up by time.
CREATE INDEX decision_decided_at ON decision (decided_at);

-- +goose Down
DROP TABLE decision;
