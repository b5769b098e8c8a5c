#!/usr/bin/env bash
# The tensor-core models against outputs recorded on a GPU (tests/data/mma_recorded_h200/README.md):
# every file must pass `mpverify eval --op dot --check` under the sm90 preset of its instruction, with as
# many passes as it has lines; and the presets of another architecture (sm80: F = 24, halves; for FP8
# mma.sync, sm89; for wgmma, Blackwell's tcgen05 with the same types: F = 25 for FP8) must fail on some of
# them, so the recordings can tell the architectures apart.
#   check_recorded_mma.sh MPVERIFY_BIN DIR
set -uo pipefail
bin=${1:?usage: check_recorded_mma.sh MPVERIFY_BIN DIR}
dir=${2:?usage: check_recorded_mma.sh MPVERIFY_BIN DIR}
failed=0 files=0 other_failures=0
for f in "$dir"/*.txt.gz; do
  [ -e "$f" ] || { echo "no recordings in $dir"; exit 1; }
  name=$(basename "$f" .txt.gz)
  instruction=${name%.k*}
  lines=$(gzip -dc "$f" | wc -l)
  result=$(gzip -dc "$f" | "$bin" eval --op dot --arch "sm90.$instruction" --check | tail -1)
  files=$((files + 1))
  if [ "$result" != "$lines passed, 0 failed" ]; then
    echo "FAILED: sm90.$instruction on $name: $result (expected $lines passed, 0 failed)"
    failed=1
  fi
  other=sm80.$instruction
  case "$instruction" in
    mma.m16n8k32.*) other=sm89.$instruction ;;
    wgmma.*) other=sm100.tcgen05.${instruction#wgmma.} ;;
  esac
  result=$(gzip -dc "$f" | "$bin" eval --op dot --arch "$other" --check | tail -1)
  other_failures=$((other_failures + $(echo "$result" | sed -n 's/.* \([0-9]*\) failed$/\1/p')))
done
echo "$files recorded files reproduced by the sm90 presets; the other architectures' presets differ on $other_failures cases"
[ "$other_failures" -gt 0 ] || { echo "FAILED: other architectures' presets reproduce the H200's outputs too"; failed=1; }
exit $failed
