#!/usr/bin/env bash
# Install the headless browser that tests `rods view` pages as a person sees them.
#
#   bash scripts/setup.sh chromium        # Debian's chromium + chromium-driver (needs root or sudo)
#
# tests/agent/test_view_browser.py opens the HTML that `rods view` writes in Debian's
# Chromium, driven by selenium through Debian's chromedriver (the same package version as
# the browser, so no driver is ever downloaded). Idempotent: when both are installed it
# exits at once.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    echo "setup chromium: $(chromium --version 2>/dev/null | head -1) and chromedriver are installed"
    exit 0
fi

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "setup chromium: chromium is missing and this needs root (apt-get install chromium chromium-driver)" >&2
        exit 1
    fi
    SUDO="sudo"
fi
start=$SECONDS
echo "setup chromium: installing Debian's chromium and chromium-driver with apt-get (about 1-2 minutes)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
echo "setup chromium: $(chromium --version 2>/dev/null | head -1) installed in $((SECONDS - start)) s"
