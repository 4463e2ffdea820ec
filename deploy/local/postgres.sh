#!/usr/bin/env bash
# Finds or starts the PostgreSQL that `make demo` and `make run` use, and
# prints its URL on stdout (everything else goes to stderr).
#
#   1. DATABASE_URL set: used as it is.
#   2. A server already answering on 127.0.0.1:${DEMO_PG_PORT:-55433} (a demo
#      cluster started earlier): reused.
#   3. Otherwise: Debian's PostgreSQL (installed with apt-get when missing)
#      runs a cluster of its own in .cache/demo-postgres, as the postgres user,
#      on loopback only, with trust authentication. Its data persists between
#      runs and it keeps PostgreSQL's durable defaults (fsync on).
#
# Stop it with: deploy/local/postgres.sh stop
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
port="${DEMO_PG_PORT:-55433}"
dir="$root/.cache/demo-postgres"
url="postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable"

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
    echo "PostgreSQL server not found; installing Debian's postgresql package..." >&2
    if [ "$(id -u)" -ne 0 ]; then
      echo "error: not root; install it with: sudo apt-get install -y postgresql (or set DATABASE_URL)" >&2
      exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  echo "$d"
}

as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

if [ "${1:-}" = "stop" ]; then
  if [ -d "$dir/data" ]; then
    as_postgres "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  fi
  exit 0
fi

if [ -n "${DATABASE_URL:-}" ]; then
  echo "$DATABASE_URL"
  exit 0
fi

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "$url"
  exit 0
fi

bin=$(bindir)
mkdir -p "$dir"
if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; fi
if [ ! -f "$dir/data/PG_VERSION" ]; then
  echo "Creating the demo PostgreSQL cluster in $dir ..." >&2
  as_postgres "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
fi
echo "Starting the demo PostgreSQL on 127.0.0.1:$port ..." >&2
as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" >&2
echo "$url"
