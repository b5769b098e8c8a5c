# Sourced by experiments/regenerate-reports and experiments/check-reports:
# how each report of experiments/reports.list is written.
#   write_report BUILD_DIR NAME OUTPUT_DIR [JOBS]
# writes OUTPUT_DIR/NAME.md (and its figures, OUTPUT_DIR/NAME-*), with the
# training runs under OUTPUT_DIR/../runs-of-reports/NAME when OUTPUT_DIR is
# not reports/ (so that a check never touches runs/).

report_entries() {  # NAME COST MINUTES, one line each, comments and blank lines dropped
  sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$(dirname "${BASH_SOURCE[0]}")/reports.list"
}

gpu_usable() {  # whether this build can use a GPU here (the gpu reports need one): mpverify --version says
  ! "$1/mpverify" --version | grep -q '^gpu: none'
}

report_order() {  # the reports' file names in list order, comma-separated (mpverify report-page --first)
  report_entries | awk '{printf "%s%s.md", (NR > 1 ? "," : ""), $1}'
}

write_report() {
  local build=$1 name=$2 outdir=$3 jobs=${4:-2}
  local source_dir runs
  source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  if [ "$(cd "$outdir" && pwd)" = "$(cd "$source_dir/../reports" && pwd)" ]; then
    runs=$source_dir/../runs/$name
  else
    runs=$outdir/../runs-of-reports/$name
  fi
  case "$name" in
    study)
      "$build/mpverify" study --report "$outdir/study.md" --out "$runs" --jobs "$jobs" --progress ;;
    gate-calibration)
      "$build/experiments/gate_calibration" --out "$outdir/gate-calibration.md" ;;
    gpu_bench)
      "$build/experiments/bench_gpu" --markdown "$outdir/gpu_bench.md" ;;
    monitor_overhead)  # the Python module's Monitor on a torch training step
      PYTHONPATH="$build/python" /usr/bin/python3 "$source_dir/speed/bench_monitor.py" --markdown "$outdir/monitor_overhead.md" ;;
    monitor_overhead_large)  # the same on a 51.4M-parameter MLP, the two loops with targets
      PYTHONPATH="$build/python" /usr/bin/python3 "$source_dir/speed/bench_monitor.py" --model mlp50m \
        --loops every_10,every_1 --repeats 3 --steps 20 --markdown "$outdir/monitor_overhead_large.md" ;;
    allreduce_training)  # the CNN trained data-parallel, gradients all-reduced in bf16 against fp32, gated
      /usr/bin/python3 "$source_dir/allreduce/training_report.py" "$build" "$outdir/allreduce_training.md" "$runs" ;;
    sweep_throughput)  # mpverify sweep with 2 workers against 1, alternately
      /usr/bin/python3 "$source_dir/speed/bench_sweep.py" --mpverify "$build/mpverify" --markdown "$outdir/sweep_throughput.md" ;;
    block_quantize_speed)
      "$build/experiments/bench_block_quantize" --markdown "$outdir/block_quantize_speed.md" ;;
    accumulation_parity)  # the CNN trained in fp8 under the Hopper model, with and without promotion, against fp32
      "$build/experiments/parity_table" --recipes "fp8,fp8:accumulation=hopper,fp8:accumulation=hopper,promotion=128" \
        --report "$outdir/accumulation_parity.md" --runs "$runs" --jobs "$jobs" --progress ;;
    gate-calibration-real)
      "$source_dir/parity/gate_calibration_real" "$build" 60 "$outdir/gate-calibration-real.md" ;;
    *)
      if [ -x "$source_dir/${name}_report" ]; then
        "$source_dir/${name}_report" "$build" "$outdir/$name.md"
      elif [ -x "$build/experiments/$name" ]; then
        if "$build/experiments/$name" --help | grep -q -- '--runs'; then
          "$build/experiments/$name" --report "$outdir/$name.md" --runs "$runs" --jobs "$jobs" --progress
        else
          "$build/experiments/$name" --report "$outdir/$name.md" --progress
        fi
      else
        echo "write_report: no command for report '$name' (no experiments/${name}_report, no $build/experiments/$name)" >&2
        return 2
      fi ;;
  esac
}
