#!/usr/bin/env bash
# Installs what one of ferry's commands needs on Debian 12 (as root), and nothing more:
#
#   scripts/setup.sh demo    to build ferry and run scripts/demo.sh (local nodes, moto_server, python3-eliot)
#   scripts/setup.sh test    to build and run the tests and fuzzers: the demo's needs, and every test peer
#   scripts/setup.sh bench   to build and run the benchmarks: the tests' needs, and Google Benchmark
#
# Idempotent: packages already present are skipped by apt-get, and the update runs once a day at most.
set -euo pipefail

profile=${1:-test}
build=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssh-dev libarchive-dev libssl-dev libfmt-dev libzstd-dev
  libcli11-dev libtomlplusplus-dev libpugixml-dev
)
# Local nodes (sshd in network namespaces), the example's venv and trace, the Python API example's cloudpickle,
# moto_server's client.
demo=(openssh-server openssh-client iproute2 procps psmisc curl ca-certificates python3-eliot python3-cloudpickle awscli)
# The test framework, the fuzzers' clang, and the peers the tests compare against (zstd makes the zips
# with method 93 that the node's reader is tested on; bsdtar, from libarchive-tools, must read ferry's).
test=(libgtest-dev libgmock-dev clang libclang-rt-14-dev python3-distributed
      zip unzip zstd rsync pssh parallel chromium debootstrap libarchive-tools)
bench=(libbenchmark-dev)

# The OTLP export's independent decoder (tests/peers/otlp_decode) runs on Node.js, with protobufjs from npm:
# Debian's, unless the machine has its own.
command -v node >/dev/null && command -v npm >/dev/null || test+=(nodejs npm)

case "$profile" in
  demo) packages=("${build[@]}" "${demo[@]}") ;;
  test) packages=("${build[@]}" "${demo[@]}" "${test[@]}") ;;
  bench) packages=("${build[@]}" "${demo[@]}" "${test[@]}" "${bench[@]}") ;;
  *) echo "usage: $0 [demo|test|bench]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  stamp=/var/lib/apt/periodic/ferry-update-stamp
  if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440 2>/dev/null)" ]; then
    apt-get update -qq
    mkdir -p "$(dirname "$stamp")" && touch "$stamp"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# moto_server (and for the tests, the aws CLI) are the peers for S3 and EC2; they come with the machine's Python.
for tool in moto_server aws; do
  command -v "$tool" >/dev/null || { echo "setup: '$tool' is not on PATH (needed as a peer)" >&2; exit 1; }
done

[ "$profile" = demo ] && exit 0

# An older distribution for the node program's test (tests/agent/test_node_chroot.cpp): Debian 11, whose glibc
# is older than this machine's. Made once, from the Debian mirror apt already uses, and kept.
old_root=/var/cache/ferry/debian-11
if [ ! -f "$old_root/etc/debian_version" ]; then
  mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null |
           grep -v -- '-security' | grep '/debian/$' | head -n 1 || true)
  [ -n "$mirror" ] || { echo "setup: no Debian mirror in apt's sources for debootstrap" >&2; exit 1; }
  rm -rf "$old_root.tmp" && mkdir -p "$(dirname "$old_root")"
  debootstrap --variant=minbase bullseye "$old_root.tmp" "$mirror" >"$old_root.log" 2>&1 ||
    { echo "setup: debootstrap of Debian 11 failed; see $old_root.log" >&2; exit 1; }
  mv "$old_root.tmp" "$old_root"
fi
