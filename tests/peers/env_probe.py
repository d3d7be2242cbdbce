"""What a Python program sees of its environment, one fact a line, so that two runs compare line for line.

Run in the workspace on the workstation, and through `ferry run` on a node, the output must be the same:
  python3 env_probe.py [NAME...] [--read PACKAGE:RESOURCE...] [--task INPUT]
imports each NAME, then prints, sorted where order means nothing:
  path N ENTRY       sys.path in order, each entry as the directory it stands for (see below)
  module NAME FILE   each non-stdlib module loaded, and each NAME, with the file it came from
  nspath NAME DIR    each entry of a namespace package's __path__
  dist NAME VERSION  every distribution importlib.metadata finds
  entry GROUP NAME VALUE   every entry point
  read PKG:RES TEXT  a resource read through importlib.resources and through __file__

On a node, a layer's directory is named by its id. The site file ferry hands the import hook (FERRY_SITE)
says which workstation directory each layer stands for; paths are printed as that directory, so a module
loaded from the right layer prints the workstation's path, and one loaded from anywhere else does not.
Consecutive sys.path entries that stand for the same directory (a site-packages directory ships one layer
per distribution) print once.
"""
import json
import os
import sys


def layer_names():
    # node directory -> the workstation's, from the site file; nothing on the workstation.
    site = os.environ.get("FERRY_SITE")
    if not site:
        return []
    with open(site) as f:
        spec = json.load(f)
    out = []
    for slot in spec["path"]:
        for d in slot.get("dirs", []):
            out.append((d, slot["local"]))
    for local, node in spec["dirs"]:
        out.append((node, local))
    return sorted(out, key=lambda p: -len(p[0]))


NAMES = layer_names()


def local(path):
    if not isinstance(path, str) or not path:
        return path
    for node, here in NAMES:
        if path == node or path.startswith(node + "/"):
            return here + path[len(node):]
    return path


def main(argv):
    wanted, reads = [], []
    while argv:
        a = argv.pop(0)
        if a == "--read":
            reads.append(argv.pop(0))
        elif a == "--task":  # a map's input: the output is the same for every task
            argv.pop(0)
        else:
            wanted.append(a)
    for name in wanted:
        __import__(name)
    lines = []

    entries = []
    for p in sys.path:
        shown = os.path.abspath(local(p)) if p else "''"
        if not entries or entries[-1] != shown:
            entries.append(shown)
    lines += ["path %02d %s" % (i, e) for i, e in enumerate(entries)]

    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    mods = []
    for name, module in list(sys.modules.items()):
        top = name.split(".")[0]
        if name in ("__main__", "sitecustomize", "usercustomize"):
            continue
        if top in stdlib and name not in wanted:
            continue
        where = getattr(module, "__file__", None)
        mods.append("module %s %s" % (name, local(where) if where else "-"))
        if getattr(module, "__file__", None) is None and hasattr(module, "__path__"):
            for d in module.__path__:
                mods.append("nspath %s %s" % (name, local(d)))
    lines += sorted(mods)

    import importlib.metadata as md
    lines += sorted("dist %s %s" % (d.metadata["Name"], d.version) for d in md.distributions())
    every = set((e.group, e.name, e.value) for d in md.distributions() for e in d.entry_points)
    lines += sorted("entry %s %s %s" % e for e in every)

    import importlib.resources as res
    for r in reads:
        pkg, name = r.split(":")
        module = __import__(pkg)
        via_res = res.files(pkg).joinpath(name).read_text().strip()
        with open(os.path.join(os.path.dirname(module.__file__), name)) as f:
            via_file = f.read().strip()
        lines.append("read %s %s | %s" % (r, via_res, via_file))
    sys.stdout.write("".join(l + "\n" for l in lines))


main(sys.argv[1:])
