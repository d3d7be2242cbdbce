#!/usr/bin/env bash
# Installs everything ferry needs to build, test and run its demo on Debian 12 (as root).
# Idempotent: packages already present are skipped by apt-get, and the update runs once a day at most.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssh-dev libarchive-dev libssl-dev libfmt-dev
  libcli11-dev libtomlplusplus-dev libpugixml-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-eliot
  openssh-server openssh-client iproute2 procps psmisc curl zip unzip ca-certificates
  pssh parallel chromium awscli
)

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

# moto_server and the aws CLI are the test peers for S3 and EC2; they come with the machine's Python.
for tool in moto_server aws; do
  command -v "$tool" >/dev/null || { echo "setup: '$tool' is not on PATH (needed as a test peer)" >&2; exit 1; }
done
