#!/usr/bin/env bash
# ensure-postgres.sh: make sure Debian's PostgreSQL server binaries
# (/usr/lib/postgresql/*/bin: initdb, pg_ctl, pg_basebackup) are installed,
# installing the "postgresql" package when running as root. with-infra.sh
# and the failover test (make chaos-cluster), which start their own servers
# from those binaries, call it.
set -euo pipefail
if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
	echo "ensure-postgres: PostgreSQL server binaries missing and not root: install the 'postgresql' package" >&2
	exit 1
fi
echo "ensure-postgres: PostgreSQL server binaries missing: apt-get install postgresql" >&2
# Debian's postinst would start a 'main' cluster on 5432; keep it from
# starting, as nothing here needs it (policy-rc.d 101 = "action forbidden").
policy=/usr/sbin/policy-rc.d made_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
fi
ok=0
DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null && ok=1
[ "$made_policy" = 1 ] && rm -f "$policy"
[ "$ok" = 1 ] && compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
