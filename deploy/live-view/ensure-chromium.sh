#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is on PATH, for the live view's browser test
# (tests/e2e/live_view.rs loads /debug/controllers in it and saves docs/images/live-view.png):
# installs Debian's `chromium` package with apt-get when no `chromium` command exists.
# Idempotent: does nothing when it is already installed.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if command -v chromium >/dev/null; then
  echo "chromium: $(chromium --version 2>/dev/null || echo installed)"
  exit 0
fi

echo "chromium: installing Debian's chromium"
as_root apt-get update
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
echo "chromium: $(chromium --version 2>/dev/null || echo installed)"
