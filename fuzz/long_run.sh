#!/usr/bin/env bash
# Long local fuzzing campaign over the libFuzzer build (preset fuzz): every target for its own
# number of seconds, two at a time (one per core), corpus kept in build/fuzz/fuzz/corpus/, crashes
# in build/fuzz/fuzz/artifacts/<target>/. Prints one line per target (executions, corpus, verdict)
# and the total.
#
#   bash fuzz/long_run.sh                      # default budget (~95 min on 2 cores)
#   bash fuzz/long_run.sh stop=60 hf=120       # only these targets, seconds each
set -uo pipefail
cd "$(dirname "$0")/.."
build=build/fuzz/fuzz
[ -x "$build/fuzz_stop" ] || { cmake --preset fuzz >/dev/null && cmake --build --preset fuzz; }
[ -d "$build/seeds" ] || "$build/fuzz_make_seeds" "$build/seeds"
if [ $# -gt 0 ]; then plan=("$@"); else
  plan=(session_api=1500 stop=1200 model_open=1500 tokenizer_files=1200 gguf=1500 llama2c=1200
        tokenizer=1500 hf=1500 ggml_quants=900)
fi
rm -rf "$build/fuzz-summary"
printf '%s\n' "${plan[@]}" | xargs -P "$(nproc)" -I{} bash -c '
  t=${1%%=*}; s=${1#*=}
  bash fuzz/run_fuzz.sh "$2/fuzz_$t" "$t" "$2" "$2/seeds/$t" "fuzz/regressions/$t" "$s" >/dev/null 2>&1
  cat "$2/fuzz-summary/$t.txt"' _ {} "$build"
total=$(cat "$build"/fuzz-summary/*.txt | awk '{s+=$2} END {print s+0}')
echo "total: $total executions"
