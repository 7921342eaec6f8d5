#!/usr/bin/env bash
# The whole test suite, from a clean checkout: installs what it needs, builds, runs every preset:
# the host presets (release, asan), then the ARM cross builds with their tests under qemu-user:
# aarch64 on three CPUs (cortex-a72 = Pi 4, cortex-a76 = Pi 5, max) and armhf (cortex-a7).
# Every suite runs even when an earlier one fails; the end is one line per suite and a total, and
# the exit status is non-zero if any suite failed (or did not build).
#
#   bash scripts/test.sh                      # everything (what CI runs)
#   bash scripts/test.sh release aarch64-max  # only these suites (test preset names)
#   bash scripts/test.sh demo                 # only README's first command (scripts/demo.sh)
#   bash scripts/test.sh apps                 # only the tests for app developers (ctest -L apps:
#                                             # header hygiene, C++ wrapper, Java/JNI, consumer of a
#                                             # staged install, embedded model under strace), release
# (The apps tests also run inside release, asan and the aarch64 suites, like every CTest test.)
#   bash scripts/test.sh tsan                 # ThreadSanitizer: the threaded tests (preset tsan)
#   bash scripts/test.sh fuzz                 # libFuzzer (clang): each target for
#                                             # RINGLM_FUZZ_SECONDS (15) + replay of fuzz/regressions
set -euo pipefail
cd "$(dirname "$0")/.."
t_setup=$SECONDS
bash scripts/setup.sh
echo "=== setup took $((SECONDS - t_setup))s" >&2
jobs=$(nproc)

ALL_SUITES=(release demo asan tsan fuzz aarch64-a72 aarch64-a76 aarch64-max armhf)
if [ $# -gt 0 ]; then SUITES=("$@"); else SUITES=("${ALL_SUITES[@]}"); fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/ringlm-test.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# The configure/build preset of a test preset: aarch64-a72 -> aarch64.
configure_preset_of() {
  case "$1" in
    apps) echo release ;;
    aarch64|aarch64-*) echo aarch64 ;;
    armhf|armhf-*) echo armhf ;;
    *) echo "$1" ;;
  esac
}

declare -A built=()     # configure preset -> ok | failed
summary=()
total_pass=0 total_fail=0 total_skip=0 status=0
start_all=$SECONDS

build_preset() {
  local p=$1
  [ -n "${built[$p]:-}" ] && return 0
  echo "=== $(date +%T) build $p" >&2
  local extra=()
  # The fuzz runs' length: RINGLM_FUZZ_SECONDS in the environment overrides the cache default.
  [ "$p" = fuzz ] && [ -n "${RINGLM_FUZZ_SECONDS:-}" ] && extra=(-DRINGLM_FUZZ_SECONDS="$RINGLM_FUZZ_SECONDS")
  if cmake --preset "$p" "${extra[@]}" >/dev/null && cmake --build --preset "$p" -j "$jobs"; then
    built[$p]=ok
  else
    built[$p]=failed
  fi
}

# README's first command, end to end (after release, whose build it reuses): it must exit 0 and
# print the greedy stories260K continuation with its stats line.
run_demo() {
  local t0=$SECONDS log="$logs/demo.log" ok=1
  echo "=== demo (bash scripts/demo.sh)" >&2
  if ! bash scripts/demo.sh >"$log" 2>&1; then ok=0; fi
  grep -q '^Once upon a time' "$log" && grep -q 'stop max-tokens' "$log" || ok=0
  if [ $ok -eq 1 ]; then
    total_pass=$((total_pass + 1))
  else
    tail -20 "$log"; total_fail=$((total_fail + 1)); status=1
  fi
  summary+=("$(printf '%-12s %d passed, %d failed, 0 skipped (%ds)' "demo:" "$ok" $((1 - ok)) \
                $((SECONDS - t0)))")
}

run_suite() {
  local s=$1 p t0 log total failed skipped
  if [ "$s" = demo ]; then run_demo; return; fi
  p=$(configure_preset_of "$s")
  t0=$SECONDS
  build_preset "$p"
  local tb=$((SECONDS - t0))  # build seconds (0 when an earlier suite built the preset)
  if [ "${built[$p]}" != ok ]; then
    summary+=("$(printf '%-12s build FAILED (preset %s)' "$s:" "$p")")
    total_fail=$((total_fail + 1)); status=1
    return
  fi
  echo "=== $(date +%T) preset $s" >&2
  log="$logs/$s.log"
  local rc=0
  if [ "$s" = apps ]; then
    ctest --preset release -L apps 2>&1 | tee "$log" || rc=$?
  else
    ctest --preset "$s" 2>&1 | tee "$log" || rc=$?
  fi
  # "97% tests passed, 3 tests failed out of 120"; skipped tests count as passed there.
  total=$(sed -n 's/.*tests passed, [0-9]* tests\{0,1\} failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of.*/\1/p' "$log" | tail -1)
  sed -n '/The following tests did not run:/,/^$/s/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$log" |
    sort >"$logs/$s.skipped"
  sed -n 's/^.*Test *#[0-9]*: \(.*[^ .]\) \.*[[:space:]]*Passed .*/\1/p' "$log" | sort >"$logs/$s.passed"
  skipped=$(wc -l <"$logs/$s.skipped")
  # The failed tests by name, for the summary (CI shows only the log's tail).
  sed -n '/The following tests FAILED:/,/^$/s/^[[:space:]]*[0-9]* - \(.*\)$/\1/p' "$log" >"$logs/$s.failed"
  if [ -z "$total" ]; then
    if grep -q 'No tests were found' "$log"; then total=0 failed=0; else total=0 failed=1; fi
  fi
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # ctest failed, no test named
  if [ "$failed" -ne 0 ]; then status=1; fi
  local passed=$((total - failed - skipped))
  total_pass=$((total_pass + passed)) total_fail=$((total_fail + failed))
  total_skip=$((total_skip + skipped))
  summary+=("$(printf '%-12s %d passed, %d failed, %d skipped (%ds: build %ds, tests %ds)' "$s:" \
                "$passed" "$failed" "$skipped" $((SECONDS - t0)) "$tb" $((SECONDS - t0 - tb)))")
}

for s in "${SUITES[@]}"; do
  [ "$s" = fuzz ] && rm -rf build/fuzz/fuzz/fuzz-summary  # this run's figures only
  run_suite "$s"
done

# A cross suite should run what the host runs: name the tests it skips that passed in release.
notes=()
# The fuzz suite's bounded runs: executions per target (fuzz/run_fuzz.sh writes one line each).
if printf '%s\n' "${SUITES[@]}" | grep -qx fuzz && [ -d build/fuzz/fuzz/fuzz-summary ]; then
  for f in build/fuzz/fuzz/fuzz-summary/*.txt; do [ -f "$f" ] && notes+=("fuzz $(cat "$f")"); done
fi
if [ -f "$logs/release.passed" ]; then
  for s in "${SUITES[@]}"; do
    case "$(configure_preset_of "$s")" in release|asan|tsan|fuzz) continue ;; esac
    [ -f "$logs/$s.skipped" ] || continue
    extra=$(comm -12 "$logs/release.passed" "$logs/$s.skipped" | paste -sd',' -)
    if [ -n "$extra" ]; then notes+=("note: $s skipped what release ran: $extra"); fi
  done
fi

for s in "${SUITES[@]}"; do
  if [ -s "$logs/$s.failed" ]; then notes+=("FAILED in $s: $(paste -sd',' "$logs/$s.failed")"); fi
done

echo
echo "=== summary ($((SECONDS - start_all))s)"
printf '%s\n' "${summary[@]}"
[ ${#notes[@]} -eq 0 ] || printf '%s\n' "${notes[@]}"
echo "total: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $status
