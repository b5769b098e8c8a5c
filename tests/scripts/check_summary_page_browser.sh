#!/usr/bin/env bash
# `mpverify summarize --report`'s page in a browser: a small run trained and summarised, its page loaded in
# headless Chromium, which prints the DOM it built and saves a screenshot. The DOM must hold the page's title,
# both figures (the heat map's cells with their titles, the histograms' bars) and no left-out figure; the
# screenshot must be a PNG of the window's size (the page rendered). Skips (exit 77) without Chromium.
#   check_summary_page_browser.sh MPVERIFY_BIN
set -uo pipefail
bin=${1:?usage: check_summary_page_browser.sh MPVERIFY_BIN}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "SKIP: no Chromium on PATH (Debian: apt-get install chromium; .ci/install-deps installs it)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

"$bin" train --model mlp --data synthetic --train-size 256 --test-size 64 --batch-size 32 --steps 6 --recipe o2 \
  --scaler torch --backend emu --quiet --out "$tmp/run" > "$tmp/train.out" 2>&1 || fail "train exited $?"
"$bin" summarize "$tmp/run" --report "$tmp/reports/summary.md" > "$tmp/summarize.out" 2>&1 ||
  fail "summarize exited $?: $(tail -2 "$tmp/summarize.out")"
page="$tmp/reports/summary.html"
[ -f "$page" ] || { echo "FAILED: no page"; exit 1; }

# As root Chromium needs --no-sandbox; the window's size is the screenshot's.
browse() {
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
    --virtual-time-budget=3000 --window-size=1200,900 "$@" "file://$page" 2>>"$tmp/browser.log"
}
dom=$(browse --dump-dom)
grep -q "<title>Run summary: $tmp/run</title>" <<<"$dom" || fail "the page's title: $(grep -o '<title>[^<]*' <<<"$dom" | head -1)"
svgs=$(grep -o '<svg' <<<"$dom" | wc -l)
[ "$svgs" -eq 2 ] || fail "the page shows $svgs figures, not 2"
grep -q '<title>[^<]*step [0-9]*: [0-9.e+-]*</title>' <<<"$dom" || fail "the heat map has no cell with its title"
grep -q 'fill="#4477aa"' <<<"$dom" || fail "the histograms have no bar"
! grep -q 'left out' <<<"$dom" || fail "the page left a figure out: $(grep -o '[^>]*left out[^<]*' <<<"$dom" | head -1)"

(cd "$tmp" && browse --screenshot="$tmp/page.png" > /dev/null)
if [ ! -s "$tmp/page.png" ]; then
  fail "no screenshot: $(tail -2 "$tmp/browser.log")"
else
  signature=$(od -An -tx1 -N8 "$tmp/page.png" | tr -d ' \n')
  [ "$signature" = "89504e470d0a1a0a" ] || fail "the screenshot is not a PNG ($signature)"
  size=$(od -An -tu1 -j16 -N8 "$tmp/page.png" | awk '{print $1*16777216+$2*65536+$3*256+$4 "x" $5*16777216+$6*65536+$7*256+$8}')
  [ "$size" = "1200x900" ] || fail "the screenshot is $size, not the window's 1200x900"
fi
[ "$failures" -eq 0 ] && echo "summarize's page rendered: 2 figures, a 1200x900 screenshot"
exit $((failures > 0))
