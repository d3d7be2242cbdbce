#!/usr/bin/env bash
# The fuzzers of tests/fuzz: builds them with clang, libFuzzer, AddressSanitizer and UBSan (build-fuzz), then
# runs each for a while, starting from the seeds in tests/fuzz/corpus.
#
#   scripts/fuzz.sh [--seconds N] [--keep] [TARGET...]     TARGET: config trace s3_xml ec2_xml ignore zip plan api pool
#
# --seconds: per target (default 20; the test command runs 15 each, a long run 600). Targets run $(nproc)
#            at a time, so N seconds each is N seconds of one CPU each.
# --keep:    merge the new inputs that add coverage into tests/fuzz/corpus (minimised), to commit.
# Without --keep the repository is left as it was: new inputs go to a scratch corpus in build-fuzz/.
# A crash, a leak, a timeout or a sanitizer report fails the script; the input is kept in
# build-fuzz/findings/TARGET/ with the fuzzer's log, to reproduce with `build-fuzz/tests/fuzz/fuzz_TARGET FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
keep=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(config trace s3_xml ec2_xml ignore zip plan api pool)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [ -d "tests/fuzz/corpus/$t" ] || { echo "fuzz.sh: no target '$t' (one of: ${all[*]})" >&2; exit 2; }
done

./scripts/setup.sh test
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFERRY_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)"

out=build-fuzz/findings
run_one() {
  local t=$1 scratch=build-fuzz/corpus/$1 log=build-fuzz/logs/$1.log
  mkdir -p "$scratch" "$out/$t" build-fuzz/logs
  local dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  # The first corpus directory receives new inputs; the repository's seeds are read only.
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "build-fuzz/tests/fuzz/fuzz_$t" "${dict[@]}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$out/$t/" "$scratch" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    rmdir "$out/$t" 2>/dev/null || true
  else
    cp "$log" "$out/$t/fuzzer.log"
    return 1
  fi
}

summary() {
  local t=$1 log=build-fuzz/logs/$1.log
  local execs cov ft files bytes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2)
  files=$(find "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" -type f | wc -l)
  bytes=$(cat "build-fuzz/corpus/$t"/* "tests/fuzz/corpus/$t"/* 2>/dev/null | wc -c)
  printf '%-8s %6ss %10s execs  cov %5s  ft %6s  corpus %5s files %8s bytes\n' \
    "$t" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$files" "$bytes"
}

failed=()
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!); names+=("$t")
  if [ ${#pids[@]} -ge "$(nproc)" ]; then
    wait "${pids[0]}" || failed+=("${names[0]}")
    pids=("${pids[@]:1}"); names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done

for t in "${targets[@]}"; do summary "$t"; done
if [ $keep = 1 ]; then
  for t in "${targets[@]}"; do
    mkdir -p "build-fuzz/merged/$t"
    "build-fuzz/tests/fuzz/fuzz_$t" -merge=1 "build-fuzz/merged/$t" "tests/fuzz/corpus/$t" "build-fuzz/corpus/$t" \
      >"build-fuzz/logs/$t.merge.log" 2>&1
    rm -rf "tests/fuzz/corpus/$t" && mv "build-fuzz/merged/$t" "tests/fuzz/corpus/$t"
  done
fi
if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "fuzz.sh: fuzz_$t failed; its input and log are in $out/$t/:" >&2
    grep -E 'ERROR|runtime error|SUMMARY' "$out/$t/fuzzer.log" | head -n 5 >&2 || true
  done
  exit 1
fi
