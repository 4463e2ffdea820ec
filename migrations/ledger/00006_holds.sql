-- +goose Up
-- Holds (CONTRACTS.md section 9): an approved transfer with captura=MANUAL
-- reserves its amount on the source account instead of posting it; a
-- capture, a cancellation or the expiry later closes the reservation, once.

-- The amount of an account's open reservations, kept in the account row in
-- the transaction that opens or closes each one, so that the available
-- balance (balance_cents - reserved_cents) is read without summing holds.
-- A funding account is never the source of a transfer, so it holds none.
ALTER TABLE account ADD COLUMN reserved_cents BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT account_reserved_non_negative CHECK (reserved_cents >= 0),
    ADD CONSTRAINT account_reserved_within_balance CHECK (funding OR reserved_cents <= balance_cents),
    ADD CONSTRAINT account_funding_reserves_nothing CHECK (NOT funding OR reserved_cents = 0);

-- A hold's marker records the ledger's decision on the analysed record:
-- RESERVADA. What became of the reservation is its row below.
ALTER TABLE processed_transfer DROP CONSTRAINT processed_transfer_result_check;
ALTER TABLE processed_transfer ADD CONSTRAINT processed_transfer_result_check
    CHECK (result IN ('EM_PROCESSAMENTO', 'LIQUIDADA', 'REJEITADA', 'RESERVADA'));

-- One row per hold the ledger reserved, keyed by the transfer id (its marker
-- is in processed_transfer with result RESERVADA). It is inserted open in
-- the settlement transaction and closed once, by whichever of capture,
-- cancellation and expiry commits first: each closes it only while it is
-- open, under its row lock, so a later one finds it closed and changes
-- nothing.
CREATE TABLE reservation (
    transfer_id     UUID PRIMARY KEY,
    source_account  TEXT COLLATE "C" NOT NULL,
    dest_account    TEXT COLLATE "C" NOT NULL,
    currency        TEXT        NOT NULL,
    amount_cents    BIGINT      NOT NULL CHECK (amount_cents > 0),
    expires_at      TIMESTAMPTZ NOT NULL,
    state           TEXT        NOT NULL DEFAULT 'open'
                    CHECK (state IN ('open', 'captured', 'cancelled', 'expired')),
    -- What a capture posted: at most the amount reserved.
    captured_cents  BIGINT,
    -- The evento-id of the command that closed it (CapturaSolicitada or
    -- CancelamentoSolicitado); NULL when it expired.
    closed_by       UUID,
    -- The id of the event that announced the closing
    -- (TransferenciaLiquidada or TransferenciaCancelada).
    closed_event_id UUID,
    closed_at       TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT reservation_captured_amount CHECK (captured_cents BETWEEN 1 AND amount_cents),
    CONSTRAINT reservation_captured_iff_state CHECK ((state = 'captured') = (captured_cents IS NOT NULL)),
    CONSTRAINT reservation_closed_iff_state CHECK ((state = 'open') = (closed_at IS NULL)
                                                   AND (state = 'open') = (closed_event_id IS NULL)),
    CONSTRAINT reservation_closed_by_command CHECK ((state IN ('captured', 'cancelled')) = (closed_by IS NOT NULL))
);

-- The expiry sweep: the open reservations, oldest expiry first. Partial, so
-- that closed reservations cost it nothing.
CREATE INDEX reservation_open_expiry ON reservation (expires_at) WHERE state = 'open';

-- +goose Down
DROP TABLE reservation;
ALTER TABLE processed_transfer DROP CONSTRAINT processed_transfer_result_check;
ALTER TABLE processed_transfer ADD CONSTRAINT processed_transfer_result_check
    CHECK (result IN ('EM_PROCESSAMENTO', 'LIQUIDADA', 'REJEITADA'));
ALTER TABLE account DROP COLUMN reserved_cents;
