#!/usr/bin/env bash
# The test command: builds ferry with AddressSanitizer and UBSan and runs every test against that build.
# Real peers (python3-eliot, moto_server, sshd, git, the aws CLI, chromium) are used where they exist, so
# the set-up installs them first. One build, not two: the sanitizers check everything the tests run,
# and a second (optimised) build would double the time on a 2-core machine; scripts/build.sh release
# makes that one for the demo and the benches. Every fuzzer (tests/fuzz) runs 15 s from its corpus,
# so a parser change that crashes on a known input, or on one found quickly, fails the tests too.
# The fuzzers are built and run beside the tests, not after them: the tests wait on sshd, moto_server
# and timers as much as on the CPU, and the fuzzers take up what they leave.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

./scripts/build.sh asan
fuzz_log=build-asan/fuzz.log
./scripts/fuzz.sh --seconds 15 >"$fuzz_log" 2>&1 &
fuzz_pid=$!
trap 'kill "$fuzz_pid" 2>/dev/null || true' EXIT
tests=0
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" || tests=$?
fuzz=0
wait "$fuzz_pid" || fuzz=$?
trap - EXIT
cat "$fuzz_log"
[ "$tests" -eq 0 ] || { echo "test.sh: the tests failed" >&2; exit 1; }
[ "$fuzz" -eq 0 ] || { echo "test.sh: a fuzzer failed (see above)" >&2; exit 1; }
