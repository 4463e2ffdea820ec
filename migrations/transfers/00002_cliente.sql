-- +goose Up
-- The client (the token's sub) that created the transfer (CONTRACTS.md
-- section 8): only that client, or an operator, reads it, and its
-- Idempotency-Key is bound to that client as well as to the body. NULL for
-- transfers created before this migration: only operators read those.
ALTER TABLE transferencia ADD COLUMN cliente_id TEXT
    CONSTRAINT transferencia_cliente_id_not_empty CHECK (cliente_id <> '');

-- +goose Down
ALTER TABLE transferencia DROP COLUMN cliente_id;
