-- +goose Up
-- Velocity is counted per client and source account (CONTRACTS.md section 8,
-- clienteId). Only the titular's transfers can debit an account (the ledger
-- rejects the rest with ORIGEM_NAO_AUTORIZADA), so a legitimate client's
-- quota on its own account is the account's quota as before; but transfers
-- that another client requests from that account, which the ledger will
-- reject, count only toward that other client's quota, so no client can use
-- up a victim's velocity quota and have the victim's own transfers blocked.
-- '' is the client of requests that name none (producers that predate
-- clienteId): they share one quota per account, as all requests did before.
ALTER TABLE decision ADD COLUMN client_id TEXT NOT NULL DEFAULT '';

DROP INDEX decision_velocity;
CREATE INDEX decision_velocity ON decision (source_account, client_id, occurred_at)
    INCLUDE (amount_cents) WHERE outcome = 'APPROVED';

-- +goose Down
DROP INDEX decision_velocity;
CREATE INDEX decision_velocity ON decision (source_account, occurred_at)
    INCLUDE (amount_cents) WHERE outcome = 'APPROVED';
ALTER TABLE decision DROP COLUMN client_id;
