#!/usr/bin/env bash
# The test command: builds ferry twice (optimised, then with AddressSanitizer and UBSan) and runs every
# test against each build. Real peers (python3-eliot, moto_server, sshd, git, the aws CLI) are used
# where they exist, so the set-up installs them first.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

./scripts/build.sh release
ctest --test-dir build --output-on-failure -j "$jobs"

./scripts/build.sh asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"
