-- +goose Up
-- An event whose last send failed because the broker could not be reached
-- (pkg/outage.Unavailable: refused or lost connections, timeouts, a
-- broker without a leader) waits for the broker, not for its own backoff:
-- when the relay sees the broker take a send again, every such event is due
-- at once (pkg/outbox, relay outage probe). Other failures (a refusal of the
-- record, a missing ACL, an unknown topic) keep their backoff.
ALTER TABLE outbox_event ADD COLUMN waits_for_broker BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE outbox_event DROP COLUMN waits_for_broker;
