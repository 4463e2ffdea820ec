#!/bin/sh
# The postgres image's entrypoint, reduced to what docker-compose.yml uses:
# on an empty PGDATA, initdb with POSTGRES_USER as the superuser and
# POSTGRES_PASSWORD, create POSTGRES_DB, run /docker-entrypoint-initdb.d/*.sql
# and *.sh against a server listening on the Unix socket only; then run the
# server as the postgres user with the given arguments on every address.
set -eu
if [ "${1:-postgres}" = postgres ]; then
	[ "$#" -gt 0 ] && shift
else
	exec "$@"
fi
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is empty: the postgres image refuses to start without one}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" postgres "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
		--auth-local=trust --auth-host=scram-sha-256 >/dev/null
	rm -f "$pwfile"
	# As the image does: password logins from any address (the compose network).
	printf 'host all all all scram-sha-256\nhost replication all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
	pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" start >/dev/null
	if [ "$db" != postgres ]; then
		psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d postgres -c "CREATE DATABASE \"$db\"" >/dev/null
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case $f in
		*.sql) echo "initdb: running $f"; psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d "$db" -f "$f" >/dev/null ;;
		*.sh) echo "initdb: sourcing $f"; . "$f" ;;
		*) ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
	echo "initdb: done"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
