#!/usr/bin/env bash
# Makes the example project's own virtual environment, examples/project/.venv, on Debian's Python, with
# two third-party packages in it: tabulate, taken from Debian's python3-tabulate package (fetched with
# `apt-get download`, unpacked into the venv's site-packages; nothing is installed system-wide), and eliot
# with what it imports, copied from Debian's python3-eliot (which the demo's set-up installs). Nodes see the
# project's environment and not their own packages, so what train.py imports must be in it.
# Idempotent: an existing venv with both is kept.
set -euo pipefail
cd "$(dirname "$0")/../examples/project"

python=/usr/bin/python3
venv=.venv
site=$("$python" -c 'import sys; print(f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages")')
if [ -f "$venv/$site/tabulate.py" ] && [ -d "$venv/$site/eliot" ]; then
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
# eliot and every top-level package (with its metadata) that importing it loads from Debian's dist-packages.
"$python" - "$venv/$site" <<'PY'
import os, shutil, sys
before = set(sys.modules)  # what Debian's own .pth files loaded at start-up is not eliot's
import eliot
root = '/usr/lib/python3/dist-packages/'
names = {m.__file__[len(root):].split('/')[0] for k, m in list(sys.modules.items())
         if k not in before and (getattr(m, '__file__', None) or '').startswith(root)}
tops = {n.split('.')[0].lower().replace('_', '-') for n in names}
# Metadata, and the -nspkg.pth files that make namespace packages (zope) without their __init__.py.
names |= {e for e in os.listdir(root)
          if e.endswith(('.dist-info', '.egg-info', '-nspkg.pth'))
          and e.split('-')[0].split('.')[0].lower().replace('_', '-') in tops}
for n in sorted(names):
    (shutil.copytree if os.path.isdir(root + n) else shutil.copy2)(root + n, os.path.join(sys.argv[1], n))
PY
"$venv/bin/python" -c 'import eliot; print("example venv: eliot", eliot.__version__)'
