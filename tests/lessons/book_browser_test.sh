#!/usr/bin/env bash
# `flashlab book` in a real browser (Debian's chromium, headless, nothing downloaded):
#   1. the book is written into a fresh folder;
#   2. every page loads with no console message (an error, a blocked fetch, a warning);
#   3. every figure renders: each standalone SVG is screenshotted and must be drawn on (the
#      share of non-white pixels, book_check.py pixels), and each lesson page holds as many
#      inline figures as it links standalone ones;
#   4. every link of every page resolves inside the book (book_check.py links).
# Usage: book_browser_test.sh <flashlab binary> <folder for the book and the screenshots>
set -euo pipefail
flashlab=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
skip=77

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium found; scripts/install-deps.sh installs Debian's chromium"
  exit $skip
fi
python=$(command -v python3 || true)
[ -n "$python" ] || { echo "SKIPPED: no python3; scripts/install-deps.sh installs it"; exit $skip; }

fail() { echo "FAILED: $*"; exit 1; }

rm -rf "$out"
mkdir -p "$out/shots"
site="$out/site"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$flashlab" book "$site"

run_browser() {  # run_browser <url> <extra flags...>: the DOM on stdout, the log in $out
  local url=$1; shift
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --no-first-run --user-data-dir="$profile" \
    --enable-logging=stderr --v=0 "$@" "$url" 2>> "$out/browser.log"
}

: > "$out/browser.log"
pages=0
for page in "$site"/*.html; do
  before=$(grep -c "CONSOLE" "$out/browser.log" || true)
  dom=$(run_browser "file://$page" --dump-dom)
  after=$(grep -c "CONSOLE" "$out/browser.log" || true)
  [ "$after" = "$before" ] || { grep "CONSOLE" "$out/browser.log"; fail "$page wrote to the console"; }
  grep -q "</main>\|</body>" <<< "$dom" || fail "$page did not load"
  case "$(basename "$page")" in
    lesson-*)
      inline=$(grep -c "<figure id=" <<< "$dom" || true)
      linked=$({ grep -o 'href="figures/[^"]*"' <<< "$dom" || true; } | wc -l)
      [ "$inline" = "$linked" ] || fail "$page: $inline inline figures, $linked linked"
      [ "$inline" = "$(grep -c "<svg" <<< "$dom" || true)" ] || fail "$page: a figure is not an <svg>"
      ;;
  esac
  pages=$((pages + 1))
done
echo "$pages pages loaded without a console message"

shots=()
for svg in "$site"/figures/*.svg; do
  name=$(basename "$svg" .svg)
  size=$(grep -o 'viewBox="0 0 [0-9.]* [0-9.]*"' "$svg" | head -1 | awk '{printf "%d,%d", $3, $4}')
  [ -n "$size" ] || fail "$svg has no viewBox"
  run_browser "file://$svg" --screenshot="$out/shots/$name.png" --window-size="$size" > /dev/null
  [ -s "$out/shots/$name.png" ] || fail "no screenshot of $svg"
  shots+=("$out/shots/$name.png")
done
[ ${#shots[@]} -ge 7 ] || fail "only ${#shots[@]} figures; the book draws at least 7"
"$python" "$here/book_check.py" pixels "${shots[@]}" || fail "a figure is blank"
if grep -q "CONSOLE" "$out/browser.log"; then
  grep "CONSOLE" "$out/browser.log"
  fail "a figure wrote to the console"
fi
"$python" "$here/book_check.py" links "$site" || fail "a link does not resolve"
echo "book browser test passed; screenshots in $out/shots"
