#!/usr/bin/env bash
# The GPU session checked without a GPU (experiments/gpu_session run --dry-run): the steps in their order of
# value, each writing its files as it ends; the clock skipping a step that would not end with the spare
# seconds left, and saying so; at most 8 files returned, none over 16 MiB; the pack's 64 MiB carry limit.
#   check_gpu_session.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: check_gpu_session.sh SOURCE_DIR}
session=$src/experiments/gpu_session
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# 1. Budget 19 s, stubs of 5 s, 1 s to spare: a step starts when 5 + 1 s fit in what is left. The clock
# counts whole seconds, so each step reads as 5 or 6 s: tests starts with 19 s left, probe with 13-14 and
# hardware with 7-9 (runs); python has 1-4 left and bench less (skipped). Every decision has a margin of at
# least a second over that rounding.
out=$tmp/out
OUT=$out "$session" run --dry-run --budget 19 --spare 1 --stub-seconds 5 > "$tmp/stdout" 2>&1 ||
  fail "the dry run exited $?: $(tail -3 "$tmp/stdout")"
order=$(grep -oE '(START|SKIPPED) [a-z]+' "$out/device.txt" | tr '\n' ' ')
[ "$order" = "START tests START probe START hardware SKIPPED python SKIPPED bench " ] ||
  fail "steps and clock: '$order'"
grep -q 'SKIPPED python: needs about 5 s and 1 s to spare; [0-4] s left' "$out/device.txt" ||
  fail "the skip does not say what it needed and what was left: $(grep SKIPPED "$out/device.txt" | head -1)"
grep -q 'END probe: ok in [0-9]* s; wrote: mma_probe.md mma_probe_cases.tar.gz' "$out/device.txt" ||
  fail "the probe's files are not named as written: $(grep 'END probe' "$out/device.txt")"
expected="device.txt hardware.md logs.tar.gz mma_probe.md mma_probe_cases.tar.gz"
got=$(cd "$out" && ls | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$expected" ] || fail "files returned: '$got', expected '$expected'"
grep -q 'run ended: 5 files' "$out/device.txt" || fail "the closing line does not count the files"

# 2. With every step run, the files are the documented eight, in the step order of the header.
out=$tmp/all
OUT=$out "$session" run --dry-run --budget 100 --spare 0 --stub-seconds 0 > "$tmp/stdout2" 2>&1 ||
  fail "the full dry run exited $?"
n=$(find "$out" -type f | wc -l)
((n == 8)) || fail "a full run returns $n files, not 8: $(ls "$out" | tr '\n' ' ')"
for f in device.txt mma_probe.md mma_probe_cases.tar.gz hardware.md python.md gpu_bench.md speed.md logs.tar.gz; do
  [ -s "$out/$f" ] || fail "a full run did not write $f"
done
header=$(sed -n 's/^#   \([a-z]*\) .*/\1/p' "$session" | grep -v '^$' | tr '\n' ' ')
[ "$header" = "tests probe hardware python bench " ] || fail "the header's step order: '$header'"

# 3. --only runs the named steps alone; a non-empty output folder and a bad number are refused (exit 2).
out=$tmp/only
OUT=$out "$session" run --dry-run --only probe --stub-seconds 0 --spare 0 > /dev/null 2>&1
order=$(grep -oE '(START|SKIPPED) [a-z]+' "$out/device.txt" | tr '\n' ' ')
[ "$order" = "START probe " ] || fail "--only probe ran: '$order'"
OUT=$out "$session" run --dry-run > /dev/null 2>&1
(($? == 2)) || fail "a non-empty output folder was not refused with exit 2"
OUT=$tmp/bad "$session" run --dry-run --budget 1e3 > /dev/null 2>&1
(($? == 2)) || fail "--budget 1e3 was not refused with exit 2"

# 4. The limits: a file over 16 MiB is removed with a line saying so; a pack over 64 MiB is refused.
mkdir -p "$tmp/pack"
truncate -s 65M "$tmp/pack/big"
"$session" check-pack "$tmp/pack" > /dev/null 2>&1
(($? == 2)) || fail "check-pack accepted 65 MiB"
rm "$tmp/pack/big" && dd if=/dev/zero of="$tmp/pack/fits" bs=1M count=63 status=none
"$session" check-pack "$tmp/pack" > /dev/null 2>&1 || fail "check-pack refused 63 MiB"
out=$tmp/big
OUT=$out "$session" run --dry-run --only hardware --stub-seconds 0 --spare 0 --stub-bytes $((16 * 1024 * 1024 + 1)) \
  > /dev/null 2>&1
[ ! -e "$out/hardware.md" ] && grep -q 'REMOVED hardware.md: over 16 MiB' "$out/device.txt" ||
  fail "a file of 16 MiB + 1 byte was returned or not reported"
OUT=$tmp/edge "$session" run --dry-run --only hardware --stub-seconds 0 --spare 0 --stub-bytes $((16 * 1024 * 1024)) \
  > /dev/null 2>&1
[ -e "$tmp/edge/hardware.md" ] || fail "a file of exactly 16 MiB was removed"

((failures == 0)) && echo "gpu_session dry run: all checks passed"
exit $((failures > 0))
