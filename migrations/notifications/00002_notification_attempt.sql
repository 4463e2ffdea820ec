-- +goose Up
-- One row per attempt to notify an event: which channel, which topic the
-- record was read from (the main topic or one of its retry topics), and the
-- outcome. Written by the same statement that counts the attempt in
-- notification, so the two never disagree; numbered by that count.
CREATE TABLE notification_attempt (
    event_id     UUID        NOT NULL REFERENCES notification (event_id) ON DELETE CASCADE,
    attempt      INT         NOT NULL CHECK (attempt > 0),
    transfer_id  UUID        NOT NULL,
    channel      TEXT        NOT NULL,
    topic        TEXT        NOT NULL,
    outcome      TEXT        NOT NULL CHECK (outcome IN ('DELIVERED', 'FAILED', 'NO_DESTINATION')),
    error        TEXT,
    at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, attempt)
);

-- The console's journey lists a transfer's attempts.
CREATE INDEX notification_attempt_transfer ON notification_attempt (transfer_id);

-- +goose Down
DROP TABLE notification_attempt;
