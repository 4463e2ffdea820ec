-- +goose Up
-- Relay liveness, broker refusals counted apart, DEAD events that hold their
-- key back, audited operator actions, and the inbox cleanup's index
-- (issue 14).

-- lease_owner is the advisory-lock key of the relay instance that holds the
-- lease (pg_advisory_lock(hashtext('outbox_relay'), lease_owner), session
-- level, on a connection of its own): when its process dies, PostgreSQL
-- releases the lock with the connection and the lease is free at once.
-- NULL for leases taken by relays that predate it (time-bound only).
-- locked_by now names the claim (one per batch), not the relay.
ALTER TABLE outbox_event ADD COLUMN lease_owner INT;
-- refusals counts the sends the broker refused because of the record itself
-- (too large, corrupt, invalid): only these turn an event DEAD. attempts
-- still counts every failed send and paces the backoff.
ALTER TABLE outbox_event ADD COLUMN refusals INT NOT NULL DEFAULT 0 CHECK (refusals >= 0);

-- DISCARDED: an operator dropped a DEAD event for good (audited); it no
-- longer holds its key back and is never sent.
ALTER TABLE outbox_event DROP CONSTRAINT outbox_event_status_check;
ALTER TABLE outbox_event ADD CONSTRAINT outbox_event_status_check
    CHECK (status IN ('PENDING', 'PROCESSING', 'PUBLISHED', 'DEAD', 'DISCARDED'));

-- A DEAD event holds its key back: the claim probes it per key.
CREATE INDEX outbox_event_dead_key ON outbox_event (topic, key, seq) WHERE status = 'DEAD';

-- Every operator action on outbox events: who, when, what, why.
CREATE TABLE outbox_audit (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    operator  TEXT        NOT NULL CHECK (operator <> ''),
    action    TEXT        NOT NULL CHECK (action IN ('requeue', 'discard')),
    event_id  UUID        NOT NULL,
    topic     TEXT        NOT NULL,
    key       TEXT        NOT NULL,
    reason    TEXT        NOT NULL DEFAULT ''
);

-- Cleanup of processed-event rows by age (inbox.Cleanup).
CREATE INDEX inbox_event_processed_at ON inbox_event (processed_at);

-- +goose Down
DROP INDEX inbox_event_processed_at;
DROP TABLE outbox_audit;
DROP INDEX outbox_event_dead_key;
UPDATE outbox_event SET status = 'DEAD' WHERE status = 'DISCARDED';
ALTER TABLE outbox_event DROP CONSTRAINT outbox_event_status_check;
ALTER TABLE outbox_event ADD CONSTRAINT outbox_event_status_check
    CHECK (status IN ('PENDING', 'PROCESSING', 'PUBLISHED', 'DEAD'));
ALTER TABLE outbox_event DROP COLUMN refusals;
ALTER TABLE outbox_event DROP COLUMN lease_owner;
