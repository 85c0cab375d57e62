#!/usr/bin/env bash
# The HTML viewer in a real browser (Debian's chromium, headless, nothing downloaded):
#   1. the page loads with no console message and no error shown on it;
#   2. opened as #selftest, it steps forward and the state shown changes (its own report
#      says so, and the state differs from the one a fresh page shows);
#   3. a screenshot is taken.
# Usage: viewer_browser_test.sh <flashlab binary> <folder for the page and the screenshot>
set -euo pipefail
flashlab=$1
out=$2
skip=77

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium found; scripts/install-deps.sh installs Debian's chromium"
  exit $skip
fi

mkdir -p "$out"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
page="$out/viewer.html"
"$flashlab" trace --n 24 --d 4 --br 4 --bc 4 --causal --seed 0 --html "$page" > /dev/null

run_browser() {  # run_browser <url> <extra flags...>: the DOM on stdout, the log in $out
  local url=$1; shift
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --no-first-run --user-data-dir="$profile" \
    --enable-logging=stderr --v=0 "$@" "$url" 2>> "$out/browser.log"
}

: > "$out/browser.log"
fresh=$(run_browser "file://$page" --dump-dom)
stepped=$(run_browser "file://$page#selftest" --dump-dom)
run_browser "file://$page#q=3&step=3" --screenshot="$out/viewer.png" --window-size=1280,1000 > /dev/null

fail() { echo "FAILED: $*"; exit 1; }

if grep -q "CONSOLE" "$out/browser.log"; then
  grep "CONSOLE" "$out/browser.log"
  fail "the page wrote to the console (lines above)"
fi
grep -q '<pre id="errors" hidden=""></pre>' <<< "$fresh" || fail "the page shows an error"

report=$(sed -n '/id="selftest-result"/,/<\/pre>/p' <<< "$stepped")
echo "$report"
passes=$(grep -c "PASS" <<< "$report" || true)
[ "$passes" -ge 3 ] || fail "the self-test reported $passes passes, expected at least 3"
! grep -q "FAIL" <<< "$report" || fail "the self-test failed a check"

# One numbering with the printed trace: tiles, rows and keys from 0, said on the page.
grep -q "Q_0: rows 0-3<" <<< "$fresh" || fail "query tile 0 is not labelled rows 0-3"
grep -q "Numbering: query tiles i, KV tiles j, query rows and keys all count from 0" <<< "$fresh" ||
  fail "the page does not state its numbering"

state_of() { sed -n '/<div id="state">/,/<\/div>/p' <<< "$1"; }
[ -n "$(state_of "$fresh")" ] || fail "no state shown on a fresh page"
[ "$(state_of "$fresh")" != "$(state_of "$stepped")" ] || fail "stepping did not change the state shown"

[ -s "$out/viewer.png" ] || fail "no screenshot was written"
[ "$(head -c 8 "$out/viewer.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] ||
  fail "the screenshot is not a PNG"
echo "viewer browser test passed; screenshot: $out/viewer.png"
