-- +goose Up
-- Holds (CONTRACTS.md section 9): a transfer with captura=MANUAL is
-- reserved by the ledger (RESERVADA) and later captured (LIQUIDADA, in
-- whole or in part), cancelled (CANCELADA) or expired (EXPIRADA).

-- captura and expiraEm as the client asked them (expira_em only on a
-- hold), and the amount a capture settled (valorLiquidadoEmCentavos).
ALTER TABLE transferencia
    ADD COLUMN captura VARCHAR(10) NOT NULL DEFAULT 'AUTOMATICA'
        CONSTRAINT transferencia_captura_check CHECK (captura IN ('AUTOMATICA', 'MANUAL')),
    ADD COLUMN expira_em TIMESTAMPTZ,
    ADD COLUMN valor_liquidado_centavos BIGINT
        CONSTRAINT transferencia_valor_liquidado_check CHECK (valor_liquidado_centavos BETWEEN 1 AND valor_centavos),
    ADD CONSTRAINT transferencia_expira_em_iff_manual CHECK ((captura = 'MANUAL') = (expira_em IS NOT NULL));

ALTER TABLE transferencia DROP CONSTRAINT transferencia_status_check;
ALTER TABLE transferencia ADD CONSTRAINT transferencia_status_check
    CHECK (status IN ('PENDENTE', 'LIQUIDADA', 'REJEITADA', 'RESERVADA', 'CANCELADA', 'EXPIRADA'));

-- A held result may now be a reservation or a release, and a capture's
-- settlement keeps the amount it settled.
ALTER TABLE resultado_retido DROP CONSTRAINT resultado_retido_status_check;
ALTER TABLE resultado_retido ADD CONSTRAINT resultado_retido_status_check
    CHECK (status IN ('LIQUIDADA', 'REJEITADA', 'RESERVADA', 'CANCELADA', 'EXPIRADA'));
ALTER TABLE resultado_retido ADD COLUMN valor_centavos BIGINT CHECK (valor_centavos > 0);

-- A capture or cancellation of a hold, as its client asked it: the command
-- id is the request's Idempotency-Key, bound (like a transfer's) to the
-- client and the fingerprint of the request, whose first response replays
-- return. Written with its CapturaSolicitada or CancelamentoSolicitado
-- outbox row in one transaction. A transfer takes one command at most: the
-- first is accepted only while the transfer is RESERVADA, and the
-- transfer leaves RESERVADA only by a terminal result, which answers it.
CREATE TABLE comando_transferencia (
    id               UUID         PRIMARY KEY,
    transferencia_id UUID         NOT NULL REFERENCES transferencia (id),
    tipo             VARCHAR(12)  NOT NULL CHECK (tipo IN ('CAPTURA', 'CANCELAMENTO')),
    -- The amount to capture; NULL for a cancellation.
    valor_centavos   BIGINT       CHECK (valor_centavos > 0),
    cliente_id       TEXT         NOT NULL CHECK (cliente_id <> ''),
    evento_id        UUID         NOT NULL,
    hash_requisicao  BYTEA        NOT NULL CHECK (octet_length(hash_requisicao) = 32),
    resposta_status  SMALLINT     NOT NULL,
    resposta_corpo   BYTEA        NOT NULL,
    criado_em        TIMESTAMPTZ  NOT NULL DEFAULT now(),
    CONSTRAINT comando_transferencia_valor_iff_captura CHECK ((tipo = 'CAPTURA') = (valor_centavos IS NOT NULL)),
    CONSTRAINT comando_transferencia_um_por_transferencia UNIQUE (transferencia_id)
);

-- +goose Down
DROP TABLE comando_transferencia;
ALTER TABLE resultado_retido DROP COLUMN valor_centavos;
ALTER TABLE resultado_retido DROP CONSTRAINT resultado_retido_status_check;
ALTER TABLE resultado_retido ADD CONSTRAINT resultado_retido_status_check
    CHECK (status IN ('LIQUIDADA', 'REJEITADA'));
ALTER TABLE transferencia DROP CONSTRAINT transferencia_status_check;
ALTER TABLE transferencia ADD CONSTRAINT transferencia_status_check
    CHECK (status IN ('PENDENTE', 'LIQUIDADA', 'REJEITADA'));
ALTER TABLE transferencia DROP CONSTRAINT transferencia_expira_em_iff_manual,
    DROP COLUMN valor_liquidado_centavos, DROP COLUMN expira_em, DROP COLUMN captura;
