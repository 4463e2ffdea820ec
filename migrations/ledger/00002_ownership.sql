-- +goose Up
-- Ownership (CONTRACTS.md section 8): every account belongs to a client, its
-- titular, and only the titular's transfers may debit it. Accounts opened
-- before this migration have no titular (NULL): no transfer that names a
-- client debits them until an operator re-opens them with a titular
-- (POST /contas with "titular" sets a missing titular once) or the ledger
-- runs with LEDGER_OWNERSHIP=off. Funding accounts never have one.
ALTER TABLE account ADD COLUMN holder TEXT
    CONSTRAINT account_holder_shape CHECK (holder <> '' AND length(holder) <= 255);

-- A titular, once set, is permanent like the rest of an account's identity.
-- +goose StatementBegin
CREATE FUNCTION account_holder_permanent() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.holder IS NULL OR NEW.holder IS NOT DISTINCT FROM OLD.holder THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the titular of account % is permanent', OLD.id
        USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER account_holder_permanent BEFORE UPDATE OF holder ON account
    FOR EACH ROW EXECUTE FUNCTION account_holder_permanent();

-- The client (the token's sub) that made a deposit; NULL for deposits made
-- before this migration.
ALTER TABLE deposit ADD COLUMN client_id TEXT;

-- The client a settled or rejected transfer named (clienteId), for the
-- audit trail; NULL when the record named none.
ALTER TABLE processed_transfer ADD COLUMN client_id TEXT;

ALTER TABLE processed_transfer DROP CONSTRAINT processed_transfer_reason_check;
ALTER TABLE processed_transfer ADD CONSTRAINT processed_transfer_reason_check
    CHECK (reason IN ('CONTA_INEXISTENTE', 'MOEDA_INCOMPATIVEL', 'SALDO_INSUFICIENTE', 'ORIGEM_NAO_AUTORIZADA'));

-- +goose Down
ALTER TABLE processed_transfer DROP CONSTRAINT processed_transfer_reason_check;
ALTER TABLE processed_transfer ADD CONSTRAINT processed_transfer_reason_check
    CHECK (reason IN ('CONTA_INEXISTENTE', 'MOEDA_INCOMPATIVEL', 'SALDO_INSUFICIENTE'));
ALTER TABLE processed_transfer DROP COLUMN client_id;
ALTER TABLE deposit DROP COLUMN client_id;
DROP TRIGGER account_holder_permanent ON account;
DROP FUNCTION account_holder_permanent();
ALTER TABLE account DROP COLUMN holder;
