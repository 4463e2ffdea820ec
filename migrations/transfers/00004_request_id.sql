-- +goose Up
-- The request id (X-Request-Id, or the one the server made) of the request
-- that created the transfer: the operator console shows it on the journey,
-- so an operator can find that request's log lines. NULL for transfers
-- created before it was recorded.
ALTER TABLE transferencia ADD COLUMN request_id TEXT
    CONSTRAINT transferencia_request_id_shape CHECK (length(request_id) BETWEEN 1 AND 128);

-- +goose Down
ALTER TABLE transferencia DROP COLUMN request_id;
