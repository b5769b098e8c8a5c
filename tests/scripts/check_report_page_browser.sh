#!/usr/bin/env bash
# The reports page in a browser: `mpverify report-page` on the hostile folders of
# tests/data/hostile/report_page/, each page loaded in headless Chromium, which runs what the page would
# run when opened (events fire within --virtual-time-budget) and prints the DOM after it. Every hostile
# script there only marks the page (PWNED-... in the title, an attribute or an element), so:
#  1. a control page with such a script and such an event attribute shows both marks: scripts run here and
#     the marks are seen;
#  2. the figures' page holds no mark and keeps its title;
#  3. on the links' page, a check appended to a copy of it asks the browser what each link's URL is
#     (new URL, after the browser's own handling of case, whitespace and escapes): every link must be
#     http(s), or a file: URL inside the reports folder.
# Skips (exit 77) without Chromium.
#   check_report_page_browser.sh MPVERIFY_BIN HOSTILE_DIR
set -uo pipefail
bin=${1:?usage: check_report_page_browser.sh MPVERIFY_BIN HOSTILE_DIR}
data=${2:?usage: check_report_page_browser.sh MPVERIFY_BIN HOSTILE_DIR}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "SKIP: no Chromium on PATH (Debian: apt-get install chromium; .ci/install-deps installs it)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# The DOM of a page after its scripts and load events ran (as root, Chromium needs --no-sandbox).
dump() {
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
    --virtual-time-budget=3000 --dump-dom "file://$1" 2>>"$tmp/browser.log"
}

# 1. The control: the marks of a script and of an event attribute do show.
cat > "$tmp/control.html" <<'EOF'
<!DOCTYPE html><html><head><title>control</title></head><body>
<script>document.title = 'PWNED-control';</script>
<img src="data:," onerror="document.body.setAttribute('data-pwned', 'PWNED-control-onerror')">
</body></html>
EOF
control=$(dump "$tmp/control.html")
grep -q '<title>PWNED-control</title>' <<<"$control" || fail "the control's script did not run: is $browser working? $(tail -2 "$tmp/browser.log")"
grep -q 'data-pwned="PWNED-control-onerror"' <<<"$control" || fail "the control's onerror did not run"

# 2. The figures: no mark, the title kept, the writers' figure shown.
cp -r "$data/svg" "$tmp/svg"
"$bin" report-page "$tmp/svg" --title "hostile figures" > "$tmp/svg.out" 2>&1 || fail "report-page on svg/ exited $?: $(tail -2 "$tmp/svg.out")"
dom=$(dump "$tmp/svg/index.html")
grep -q '<title>hostile figures</title>' <<<"$dom" || fail "the figures' page lost its title: $(grep -o '<title>[^<]*' <<<"$dom" | head -1)"
marks=$(grep -o 'PWNED[-a-z]*' <<<"$dom" | sort -u | tr '\n' ' ')
[ -z "$marks" ] || fail "the figures' page ran or kept hostile content: $marks"
grep -q 'kept &amp; shown' <<<"$dom" || fail "the figures' page lost the writers' figure"
grep -q 'image onload.svg left out' <<<"$dom" || fail "the figures' page does not say which figure it left out"

# 3. The links, as the browser reads them.
cp -r "$data/links" "$tmp/links"
"$bin" report-page "$tmp/links" --title "hostile links" > "$tmp/links.out" 2>&1 || fail "report-page on links/ exited $?"
cat > "$tmp/links/check.js" <<EOF
const bad = [];
let n = 0;
for (const a of document.querySelectorAll('main a[href]')) {
  n++;
  const u = new URL(a.href);
  const web = u.protocol === 'http:' || u.protocol === 'https:';
  if (!web && !(u.protocol === 'file:' && a.href.startsWith('file://$tmp/links/'))) bad.push(a.href);
}
const p = document.createElement('p');
p.id = 'link-' + 'check';
p.textContent = bad.length ? 'BAD ' + bad.join(' ') : 'ok ' + n;
document.body.appendChild(p);
EOF
sed 's#</body>#<script src="check.js"></script></body>#' "$tmp/links/index.html" > "$tmp/links/checked.html"
dom=$(dump "$tmp/links/checked.html")
result=$(grep -o '<p id="link-check">[^<]*' <<<"$dom" | sed 's/.*>//')
[ "$result" = "ok 6" ] || fail "links the browser would follow out of bounds (or a count other than 6): '$result'"
grep -q '<title>hostile links</title>' <<<"$dom" || fail "the links' page lost its title"

if ((failures)); then exit 1; fi
echo "headless Chromium ran no hostile script: the control's marks showed, the figures' page holds none, its 6 links are http(s) or inside the folder"
