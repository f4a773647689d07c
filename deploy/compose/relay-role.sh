#!/bin/sh
# Runs once, when the postgres container initialises its database: creates
# walrelay's role as docs/SECURITY.md describes (LOGIN and REPLICATION, CONNECT
# on the database; the table grants follow in 10-outbox.sql), with the password
# of the compose secret walrelay_db_password.
set -eu
psql -v ON_ERROR_STOP=1 -v pw="$(cat /run/secrets/walrelay_db_password)" \
  --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'EOSQL'
CREATE ROLE walrelay LOGIN REPLICATION PASSWORD :'pw';
GRANT CONNECT ON DATABASE :"DBNAME" TO walrelay;
EOSQL
