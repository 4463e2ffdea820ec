-- +goose Up
-- The transactional outbox: one row per event, written in the same transaction
-- as the business change that caused it, published by the relay afterwards.
CREATE TABLE outbox_event (
    id              UUID PRIMARY KEY,
    -- seq orders events of one key: the relay never publishes an event while
    -- an older event of the same key is unpublished.
    seq             BIGINT GENERATED ALWAYS AS IDENTITY,
    aggregate_type  TEXT        NOT NULL,
    aggregate_id    TEXT        NOT NULL,
    topic           TEXT        NOT NULL,
    key             TEXT        NOT NULL,
    event_type      TEXT        NOT NULL,
    payload         JSONB       NOT NULL,
    headers         JSONB       NOT NULL DEFAULT '{}'::jsonb,
    occurred_at     TIMESTAMPTZ NOT NULL,
    enqueued_at     TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    status          TEXT        NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'PROCESSING', 'PUBLISHED', 'DEAD')),
    attempts        INT         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    locked_by       TEXT,
    locked_until    TIMESTAMPTZ,
    published_at    TIMESTAMPTZ,
    last_error      TEXT,
    -- The broker refused this event itself on its last attempt: it is sent
    -- alone from now on, so that it cannot fail the events beside it.
    isolate         BOOLEAN     NOT NULL DEFAULT false
);

-- The rows still to publish, in enqueue order: what the relay scans.
CREATE INDEX outbox_event_unpublished ON outbox_event (seq)
    WHERE status IN ('PENDING', 'PROCESSING');
-- Rows that hold their key back, probed per key by the claim: waiting for a
-- retry, or leased to a relay: normally few (failed rows, batches in
-- flight).
CREATE INDEX outbox_event_retry_wait ON outbox_event (topic, key, seq)
    WHERE status = 'PENDING' AND attempts > 0;
CREATE INDEX outbox_event_leased ON outbox_event (topic, key, seq)
    WHERE status = 'PROCESSING';
-- Operators list dead events.
CREATE INDEX outbox_event_dead ON outbox_event (seq) WHERE status = 'DEAD';
-- Cleanup of published rows by age.
CREATE INDEX outbox_event_published ON outbox_event (published_at)
    WHERE status = 'PUBLISHED';

-- The inbox: one row per (consumer, event) whose effect was applied.
CREATE TABLE inbox_event (
    consumer     TEXT        NOT NULL,
    event_id     UUID        NOT NULL,
    processed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- +goose Down
DROP TABLE inbox_event;
DROP TABLE outbox_event;
