-- +goose Up
-- Refunds (CONTRACTS.md section 10): the ledger returns part or all of a
-- transfer it settled from its destination to its source, each refund once,
-- and never more in all than it settled.

-- One row per refund the ledger has decided, keyed by the refund's id (its
-- estornoId). It is inserted first, in the refund's transaction, with ON
-- CONFLICT DO NOTHING, as processed_transfer is for a settlement: a
-- redelivery finds it and posts nothing (its result is the stored one), a
-- concurrent delivery waits for it. What was settled for the transfer, and
-- so what may still be refunded, is read from processed_transfer (its
-- amount) or, for a captured hold, from reservation (captured_cents); the
-- destination's titular from account.holder: neither is copied here.
CREATE TABLE refund (
    refund_id       UUID PRIMARY KEY,
    transfer_id     UUID        NOT NULL,
    result          TEXT        NOT NULL
                    CHECK (result IN ('EM_PROCESSAMENTO', 'LIQUIDADO', 'REJEITADO')),
    reason          TEXT
                    CHECK (reason IN ('SALDO_INSUFICIENTE', 'VALOR_EXCEDE_ESTORNAVEL', 'ORIGEM_NAO_AUTORIZADA',
                                      'TRANSFERENCIA_NAO_LIQUIDADA')),
    -- What was asked, as received (for audit; a refund of accounts other
    -- than the transfer's is a rejection, not an error).
    source_account  TEXT        NOT NULL,
    dest_account    TEXT        NOT NULL,
    amount_cents    BIGINT      NOT NULL CHECK (amount_cents > 0),
    currency        TEXT        NOT NULL,
    client_id       TEXT,
    operator        BOOLEAN     NOT NULL DEFAULT false,
    -- evento-id of the EstornoSolicitado, and of the result event.
    event_id        UUID        NOT NULL,
    result_event_id UUID,
    processed_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT refund_reason CHECK ((result = 'REJEITADO') = (reason IS NOT NULL))
)
-- Each marker is updated once, right after its insert, with the result (a
-- HOT update when the page has room).
WITH (fillfactor = 70);

-- The refunds settled of a transfer, summed under the transfer's lock by
-- every refund of it: partial, so that rejected refunds cost it nothing.
CREATE INDEX refund_settled_of_transfer ON refund (transfer_id) INCLUDE (amount_cents) WHERE result = 'LIQUIDADO';

-- A refund posts a debit of the destination and a credit of the source,
-- with entry_type REFUND and entry_id the refund's id: the posting's
-- natural key (entry_type, entry_id, direction) makes it once per refund.
ALTER TABLE posting DROP CONSTRAINT posting_entry_type_check;
ALTER TABLE posting ADD CONSTRAINT posting_entry_type_check
    CHECK (entry_type IN ('TRANSFER', 'DEPOSIT', 'REFUND'));

-- +goose Down
ALTER TABLE posting DROP CONSTRAINT posting_entry_type_check;
ALTER TABLE posting ADD CONSTRAINT posting_entry_type_check
    CHECK (entry_type IN ('TRANSFER', 'DEPOSIT'));
DROP TABLE refund;
