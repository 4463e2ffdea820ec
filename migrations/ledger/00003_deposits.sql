-- +goose Up
-- Deposits are minting: each row is the durable record an operator reads
-- (GET /ops/depositos, the console's deposits page). Besides the client
-- (client_id, since 00002) it keeps the request id of the request that made
-- it and the currency of the money it created, so the record stands on its
-- own without a join.
ALTER TABLE deposit ADD COLUMN request_id TEXT
    CONSTRAINT deposit_request_id_shape CHECK (length(request_id) BETWEEN 1 AND 64);
ALTER TABLE deposit ADD COLUMN currency TEXT;
UPDATE deposit d SET currency = a.currency FROM account a WHERE a.id = d.account_id;
ALTER TABLE deposit ALTER COLUMN currency SET NOT NULL;
ALTER TABLE deposit ADD CONSTRAINT deposit_currency_shape CHECK (currency ~ '^[A-Z]{3}$');

-- The operator listing reads the newest deposits first.
CREATE INDEX deposit_newest ON deposit (created_at DESC, id DESC);

-- +goose Down
DROP INDEX deposit_newest;
ALTER TABLE deposit DROP COLUMN currency;
ALTER TABLE deposit DROP COLUMN request_id;
