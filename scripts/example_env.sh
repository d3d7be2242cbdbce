#!/usr/bin/env bash
# Makes the example project's own virtual environment, examples/project/.venv, on Debian's Python, with
# one third-party package in it: tabulate, taken from Debian's python3-tabulate package (fetched with
# `apt-get download`, unpacked into the venv's site-packages; nothing is installed system-wide).
# Idempotent: an existing venv with tabulate is kept.
set -euo pipefail
cd "$(dirname "$0")/../examples/project"

python=/usr/bin/python3
venv=.venv
site=$("$python" -c 'import sys; print(f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages")')
if [ -f "$venv/$site/tabulate.py" ]; then
  exit 0
fi
"$python" -m venv --without-pip --clear "$venv"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt-get download writes into the current directory; _apt cannot write to a private temp dir.
chmod 755 "$work"
(cd "$work" && apt-get download -qq python3-tabulate 2>/dev/null)
dpkg-deb -x "$work"/python3-tabulate_*.deb "$work/root"
cp -r "$work"/root/usr/lib/python3/dist-packages/tabulate* "$venv/$site/"
"$venv/bin/python" -c 'import tabulate; print("example venv: tabulate", tabulate.__version__)'
