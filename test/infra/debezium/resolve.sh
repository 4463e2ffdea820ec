#!/usr/bin/env bash
# resolve.sh fills .cache/debezium/<version>/libs with the Kafka Connect
# worker and Debezium's PostgreSQL connector (test/infra/debezium/pom.xml),
# once: a stamp holding the POM's hash marks the cache complete, so an
# interrupted download or a POM change is redone. It prints the folder.
# `make debezium` and `make bench-debezium` run it before test/debezium.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
POM="$ROOT/test/infra/debezium/pom.xml"
LIBS="$ROOT/.cache/debezium/3.6.1.Final/libs"

stamp="$LIBS/.complete"
want=$(sha256sum "$POM" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "$LIBS"
	exit 0
fi
if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
	echo "resolve.sh: java and/or mvn not found: install openjdk-17-jre-headless and maven" >&2
	exit 1
fi
echo "resolve.sh: resolving Kafka Connect and Debezium jars into ${LIBS#"$ROOT"/} (once)" >&2
tmp="$LIBS.tmp.$$"
rm -rf -- "$tmp"
mkdir -p "$tmp"
if ! mvn -q -B -f "$POM" dependency:copy-dependencies \
	-DoutputDirectory="$tmp" -DincludeScope=runtime >"$tmp.log" 2>&1; then
	tail -n 30 "$tmp.log" >&2
	rm -rf -- "$tmp" "$tmp.log"
	echo "resolve.sh: Maven could not resolve the jars (see above)" >&2
	exit 1
fi
rm -f -- "$tmp.log"
rm -rf -- "$LIBS"
mv -- "$tmp" "$LIBS"
echo "$want" >"$stamp"
echo "$LIBS"
