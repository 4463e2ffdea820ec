-- +goose Up
-- Refunds (CONTRACTS.md section 10): each refund of a settled transfer, as
-- its client asked it. The id is the request's Idempotency-Key, bound (like
-- a transfer's) to the client and the fingerprint of the request, whose
-- first response replays return. Written with its EstornoSolicitado outbox
-- row in one transaction, under the transfer's row lock, so that the
-- refunds not rejected never exceed what was settled; the projection moves
-- it PENDENTE -> LIQUIDADO | REJEITADO from the ledger's result.
CREATE TABLE estorno (
    id               UUID         PRIMARY KEY,
    transferencia_id UUID         NOT NULL REFERENCES transferencia (id),
    valor_centavos   BIGINT       NOT NULL CHECK (valor_centavos > 0 AND valor_centavos <= 1000000000000000),
    status           VARCHAR(10)  NOT NULL CHECK (status IN ('PENDENTE', 'LIQUIDADO', 'REJEITADO')),
    motivo           VARCHAR(64)  CHECK ((status = 'REJEITADO') = (motivo IS NOT NULL)),
    -- The client (the token's sub) that asked for the refund.
    cliente_id       TEXT         NOT NULL CHECK (cliente_id <> ''),
    evento_id        UUID         NOT NULL,
    hash_requisicao  BYTEA        NOT NULL CHECK (octet_length(hash_requisicao) = 32),
    resposta_status  SMALLINT     NOT NULL,
    resposta_corpo   BYTEA        NOT NULL,
    criado_em        TIMESTAMPTZ  NOT NULL DEFAULT now(),
    atualizado_em    TIMESTAMPTZ  NOT NULL DEFAULT now()
);

CREATE INDEX estorno_transferencia ON estorno (transferencia_id);

-- The sum of the transfer's settled refunds (valorEstornadoEmCentavos),
-- added by the projection in the statement that settles each refund.
ALTER TABLE transferencia ADD COLUMN valor_estornado_centavos BIGINT NOT NULL DEFAULT 0
    CONSTRAINT transferencia_valor_estornado_check CHECK (valor_estornado_centavos >= 0);

-- +goose Down
ALTER TABLE transferencia DROP COLUMN valor_estornado_centavos;
DROP TABLE estorno;
