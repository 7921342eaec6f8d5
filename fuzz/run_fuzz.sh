#!/usr/bin/env bash
# One bounded libFuzzer run (CTest fuzz_run_<target>, and scripts/test.sh's fuzz suite):
#   run_fuzz.sh FUZZER NAME BUILD_DIR SEED_DIR REGRESSION_DIR SECONDS [extra libFuzzer flags]
# The working corpus is BUILD_DIR/corpus/NAME (seeds and regressions are read-only inputs);
# crashes land in BUILD_DIR/artifacts/NAME/ (copy a fixed one into fuzz/regressions/NAME/).
# Prints and writes BUILD_DIR/fuzz-summary/NAME.txt: "NAME: N execs in S s (R/s), corpus C, OK".
set -uo pipefail
bin=$1 name=$2 build=$3 seeds=$4 regress=$5 seconds=$6
shift 6
corpus="$build/corpus/$name"
artifacts="$build/artifacts/$name"
mkdir -p "$corpus" "$artifacts" "$build/fuzz-summary" "$build/fuzz-logs"
log="$build/fuzz-logs/$name.log"
dirs=("$corpus")
[ -d "$seeds" ] && dirs+=("$seeds")
[ -d "$regress" ] && dirs+=("$regress")
start=$(date +%s)
"$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2560 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$@" "${dirs[@]}" >"$log" 2>&1
rc=$?
end=$(date +%s)
execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
units=$(ls "$corpus" | wc -l)
secs=$((end - start)); [ "$secs" -gt 0 ] || secs=1
if [ "$rc" -eq 0 ]; then verdict=OK; else verdict="FAILED (exit $rc, see $log and $artifacts)"; fi
line="$name: $execs execs in ${secs} s ($((execs / secs))/s), corpus $units, $verdict"
echo "$line" | tee "$build/fuzz-summary/$name.txt"
if [ "$rc" -ne 0 ]; then
  grep -E 'ERROR|FUZZ_CHECK|SUMMARY|runtime error|==[0-9]+==' "$log" | head -20
  tail -40 "$log"
fi
exit "$rc"
