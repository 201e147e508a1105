#!/bin/sh
# Verify two bundled examples, write the HTML report, and screenshot it with headless Chromium
# (Debian: apt-get install chromium), so that a person can look at the page as users will see it.
# Usage: scripts/report_screenshot.sh [OUT_DIR]   (default: /tmp/ray-lint-report)
set -eu
out="${1:-/tmp/ray-lint-report}"
mkdir -p "$out"
.venv/bin/ray-lint verify examples/get_in_loop.py examples/single_actor_bottleneck.py \
    --repeat 1 --report "$out/report.html" --color never || test $? -eq 1
chromium --headless --no-sandbox --disable-gpu --window-size=1100,1800 \
    --screenshot="$out/report.png" "file://$(cd "$out" && pwd)/report.html"
echo "report: $out/report.html  screenshot: $out/report.png"
