#!/usr/bin/env bash
# ensure-chromium.sh: make sure Debian's chromium is on PATH, installing it
# when running as root. The operator console's browser tests
# (services/console, github.com/chromedp/chromedp) drive it headless, and
# fail when it is missing rather than skip.
set -euo pipefail
if command -v chromium >/dev/null; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
	echo "ensure-chromium: chromium missing and not root: install the 'chromium' package" >&2
	exit 1
fi
echo "ensure-chromium: chromium missing: apt-get install chromium" >&2
DEBIAN_FRONTEND=noninteractive apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null
