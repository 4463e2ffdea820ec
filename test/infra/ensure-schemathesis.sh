#!/usr/bin/env bash
# ensure-schemathesis.sh: make sure schemathesis (PyPI), at the pinned
# version, is installed in a private virtualenv under .cache, and print the
# path of its st command. test/schemathesis/run.sh (make schemathesis) calls
# it. Needs python3 with its venv module (Debian: python3-venv, installed
# when running as root and missing) and PyPI.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VERSION=4.32.5
VENV="$ROOT/.cache/schemathesis-venv"
ST="$VENV/bin/st"

if [ -x "$ST" ] && [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" = "$VERSION" ]; then
	echo "$ST"
	exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
	if [ "$(id -u)" != 0 ]; then
		echo "ensure-schemathesis: python3 with venv and ensurepip needed: install python3-venv" >&2
		exit 1
	fi
	echo "ensure-schemathesis: python3 venv missing: apt-get install python3-venv" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
fi
echo "ensure-schemathesis: installing schemathesis $VERSION into $VENV" >&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$VERSION" >&2
"$ST" --version >&2
echo "$ST"
