#!/usr/bin/env bash
# ensure-promtool.sh: make sure Prometheus's promtool is on PATH, installing
# Debian's "prometheus" package (which ships it) when running as root. The
# alert rules' unit tests (deploy/deploytest) and make lint need it, and
# fail when it is missing rather than skip.
set -euo pipefail
if command -v promtool >/dev/null; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
	echo "ensure-promtool: promtool missing and not root: install the 'prometheus' package" >&2
	exit 1
fi
echo "ensure-promtool: promtool missing: apt-get install prometheus" >&2
# Debian's postinst would start a Prometheus server; keep it from starting
# (policy-rc.d 101 = "action forbidden"), as with-infra.sh does for PostgreSQL.
policy=/usr/sbin/policy-rc.d made_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
fi
ok=0
DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null && ok=1
[ "$made_policy" = 1 ] && rm -f "$policy"
[ "$ok" = 1 ] && command -v promtool >/dev/null
