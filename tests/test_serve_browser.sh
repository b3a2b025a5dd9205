#!/usr/bin/env bash
# test_serve_browser.sh — a real browser on the `projmt serve` page: headless
# Debian Chromium (driven by tests/serve_browser.py over the DevTools pipe)
# loads the page, types a sentence, waits for the translation and the
# cross-attention heatmap, checks the DOM (translation equal to `projmt
# translate`, heatmap rows x columns, head tabs, model facts, no external
# resources), switches head tab and saves a screenshot to
# BUILD/test-output/serve_browser/serve.png. SKIPPED without Chromium.
set -u
CHROMIUM=${PROJMT_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] || { echo "SKIPPED: Chromium is not installed (bash scripts/setup.sh --all installs it)"; exit 77; }
source "$(dirname "$0")/serve_fixture.sh"
serve_setup serve-browser "${1:?usage: test_serve_browser.sh BUILD_DIR}"
OUT=$BUILD/test-output/serve_browser
mkdir -p "$OUT"
SENTENCE="where is the station"
EXPECTED=$(printf '%s\n' "$SENTENCE" | "$PROJMT" translate --model "$MODEL" --threads 1 2> /dev/null)
serve_start browser || { echo "FAIL: the server did not start"; exit 1; }
rm -f "$OUT/serve.png"
python3 "$(dirname "$0")/serve_browser.py" "http://127.0.0.1:$PORT/" "$OUT/serve.png" "$SENTENCE" "$EXPECTED" \
    "$CHROMIUM" > "$OUT/dom.json"
status=$?
cat "$OUT/dom.json"
serve_stop
SERVE_PID=""
[ $status -eq 0 ] || { echo "FAIL: the browser checks failed"; exit 1; }
[ "$(head -c 8 "$OUT/serve.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] \
    || { echo "FAIL: $OUT/serve.png is not a PNG"; exit 1; }
echo "ok: the page translated '$SENTENCE' and drew the heatmap; screenshot $OUT/serve.png"
