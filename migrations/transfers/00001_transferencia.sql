-- +goose Up
-- The transfer, as in the seed (V1__schema.sql of transferencias-service),
-- plus the idempotency record of the request that created it. The id is the
-- request's Idempotency-Key, so the primary key alone makes "one key, one
-- transfer" hold; the request that wins it also stores the fingerprint of its
-- body and the response it got, which replays return.
CREATE TABLE transferencia (
    id                UUID         PRIMARY KEY,
    conta_origem      VARCHAR(32)  NOT NULL CHECK (conta_origem ~ '^[A-Za-z0-9._-]{1,32}$'),
    conta_destino     VARCHAR(32)  NOT NULL CHECK (conta_destino ~ '^[A-Za-z0-9._-]{1,32}$'),
    valor_centavos    BIGINT       NOT NULL CHECK (valor_centavos > 0 AND valor_centavos <= 1000000000000000),
    moeda             CHAR(3)      NOT NULL CHECK (moeda ~ '^[A-Z]{3}$'),
    status            VARCHAR(20)  NOT NULL CHECK (status IN ('PENDENTE', 'LIQUIDADA', 'REJEITADA')),
    motivo_rejeicao   VARCHAR(255) CHECK ((status = 'REJEITADA') = (motivo_rejeicao IS NOT NULL)),
    criada_em         TIMESTAMPTZ  NOT NULL DEFAULT now(),
    atualizada_em     TIMESTAMPTZ  NOT NULL DEFAULT now(),
    -- Idempotency: SHA-256 of the canonical request body, and the first
    -- response (status code and exact body bytes).
    hash_requisicao   BYTEA        NOT NULL CHECK (octet_length(hash_requisicao) = 32),
    resposta_status   SMALLINT     NOT NULL,
    resposta_corpo    BYTEA        NOT NULL,
    CHECK (conta_origem <> conta_destino)
);

-- +goose Down
DROP TABLE transferencia;
