-- One database per service, each owned by its own role: a service can reach
-- only its own data, as in production (CONTRACTS.md: one database per
-- service). Run once by the postgres image's entrypoint, on an empty data
-- directory, as the superuser named by POSTGRES_USER.
--
-- The passwords are for the local compose stack only. Production databases
-- and credentials come from the platform (deploy/k8s: Secret per service).

CREATE ROLE transfers     LOGIN PASSWORD 'transfers';
CREATE ROLE ledger        LOGIN PASSWORD 'ledger';
CREATE ROLE antifraud     LOGIN PASSWORD 'antifraud';
CREATE ROLE notifications LOGIN PASSWORD 'notifications';
-- The services that publish events may run the logical relay
-- (OUTBOX_RELAY=logical), which streams its database's WAL: REPLICATION.
-- It also lets the role take a physical copy of the whole server, so a
-- production deployment grants it only where the logical relay runs.
ALTER ROLE transfers REPLICATION;
ALTER ROLE ledger    REPLICATION;
ALTER ROLE antifraud REPLICATION;

CREATE DATABASE transfers     OWNER transfers;
CREATE DATABASE ledger        OWNER ledger;
CREATE DATABASE antifraud     OWNER antifraud;
CREATE DATABASE notifications OWNER notifications;

-- Nobody but the owner (and the superuser) connects to a service database.
REVOKE CONNECT, TEMPORARY ON DATABASE transfers     FROM PUBLIC;
REVOKE CONNECT, TEMPORARY ON DATABASE ledger        FROM PUBLIC;
REVOKE CONNECT, TEMPORARY ON DATABASE antifraud     FROM PUBLIC;
REVOKE CONNECT, TEMPORARY ON DATABASE notifications FROM PUBLIC;
