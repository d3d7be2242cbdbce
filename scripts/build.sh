#!/usr/bin/env bash
# Installs what is missing, then configures and builds ferry.
#
#   scripts/build.sh demo      build/: ferry (-O1) and its node program (-O2) only, no debug info (scripts/demo.sh)
#   scripts/build.sh release   build/: ferry, the tests and the benchmarks, optimised
#   scripts/build.sh asan      build-asan/: ferry and the tests with AddressSanitizer and UBSan, the node
#                              program at -O1 (scripts/test.sh)
#
# Extra arguments name the targets to build (default: all that the kind configures).
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-release}
[ $# -gt 0 ] && shift
targets=("$@")
case "$kind" in
  # Without debug info (a third of an optimised file's compile time) and at -O1 (a fifth of the rest):
  # ferry's own work in the demo is orchestration, its CPU work is OpenSSL's and zlib's, and the node
  # program is -O2 in every build.
  demo) profile=demo; dir=build; targets=(ferry)
        flags=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DFERRY_BUILD_TESTS=OFF
               -DFERRY_BUILD_BENCH=OFF) ;;
  release) profile=bench; dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_BUILD_TESTS=ON -DFERRY_BUILD_BENCH=ON) ;;
  asan) profile=test; dir=build-asan
        flags=(-DCMAKE_BUILD_TYPE=Debug -DFERRY_SANITIZE=ON -DFERRY_BUILD_TESTS=ON -DFERRY_BUILD_BENCH=OFF
               -DFERRY_NODE_OPTIMIZE=-O1) ;;
  *) echo "usage: $0 [demo|release|asan] [TARGET...]" >&2; exit 2 ;;
esac
./scripts/setup.sh "$profile"
cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$dir" -j "$(nproc)"
fi
