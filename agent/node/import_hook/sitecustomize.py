# ferry's start-up hook: the node's Python sees the environment the workstation's saw.
#
# The node program puts this file's directory alone on PYTHONPATH, so Python's `site` imports it at
# start-up and the user changes no code. It reads the site file (FERRY_SITE, agent/node/site_file.hpp) and
# makes sys.path the workstation's, entry for entry: each shipped directory replaced by its layers (a
# site-packages directory has one per distribution), the node's standard library where the workstation's
# stood, the script's own directory still put first by Python afterwards. While site-packages ship, what the
# node's own site directories brought is hidden: their entries, what their .pth files added, the modules
# those imported and the finders they installed. Then the `import` lines of the workstation's .pth files
# run, in the workstation's order, each from its layer; setuptools' editable finders (PEP 660) get their
# workstation paths pointed at the layers that hold them.
#
# A lazy start (FERRY_IMPORT_SOCKET): the command started before its environment landed. Every layer's
# directory is in sys.path already, landed or not (a layer appears whole, by a rename). This hook asks the
# node program which names each layer holds and which layers are in place, and goes first on
# sys.meta_path. An import of a top-level name whose layer is still on its way then waits until the node
# program says it landed (that layer goes to the front of the node's queue), and proceeds as a normal
# import; a layer that failed raises ImportError naming it and why. importlib.metadata waits the same way
# for a distribution's layer, and a .pth line waits for what it imports. Names no layer holds fall through
# at once. Once every layer is in place the finder leaves sys.meta_path: it costs nothing from then on. At
# exit, the top-level names the program imported, in the order it first imported them, go to the node
# program: the next run fetches those layers first.
#
# A wait releases CPython's global import lock (held while finders are asked), so other threads import
# meanwhile. The hook runs at every start of Python, so it imports nothing that is not loaded already but
# _socket and _thread (no json, socket, threading or importlib.util: tens of milliseconds), and what it did
# import leaves sys.modules before the program's own code runs.
#
# Tracebacks name the workstation's files (FERRY_PATH_MAP, a JSON object: layer directory -> the workstation
# directory it stands for). Only what is printed changes; __file__ and co_filename stay the node's, which
# programs read. sys.excepthook (while it is Python's own), threading.excepthook and the traceback module's
# formatting (so traceback.print_exc() in the program too) map a frame's file at the moment it is printed,
# after its source line was read from the node's copy. Nothing is imported for it at start-up: the map is
# read at the first traceback, and the traceback and threading modules are patched when the program
# imports them (a finder that watches for those two names, and leaves once both came).
# Written for every Python 3 a node may have (3.5 on): no f-strings, the standard library only. Then the
# next sitecustomize on the path, if there is one, runs as it would have without this one.
import os
import sys

_ferry_before = set(sys.modules)


def _ferry_json(text):
    # JSON that the node program wrote (the site file, the import server's answers), never the user's: read
    # as the Python expression it is, but for its three names, without importing json.
    return eval(text, {"__builtins__": {}}, {"true": True, "false": False, "null": None})


def _ferry_lazy(address):
    # The lazy start's finder, installed; returns wait(dir): blocks until the layer at that directory is in
    # place (ImportError when it failed), or None when the node program cannot be reached.
    import _socket
    import _thread

    lock = _thread.allocate_lock()

    def ask(line, timeout=None):
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(address)
            s.sendall((line + "\n").encode("utf-8"))
            chunks = []
            while True:
                got = s.recv(65536)
                if not got:
                    break
                chunks.append(got)
                if got.endswith(b"\n"):
                    break
            if not chunks:
                raise OSError("the node program stopped")
            return _ferry_json(b"".join(chunks).decode("utf-8"))
        finally:
            s.close()

    try:
        catalogue = ask("hello %d" % os.getpid(), timeout=30)
        layers = dict((int(l["index"]), l) for l in catalogue["layers"])
    except Exception as e:  # the node program is gone: what is on the path is all there is
        sys.stderr.write("ferry: the import hook cannot reach the node program (%s)\n" % (e,))
        return None
    modules = {}  # top-level name -> indexes of the layers that hold it
    dists = {}  # normalised distribution name -> indexes
    by_dir = {}  # layer directory -> index
    for i, l in layers.items():
        by_dir[l["dir"]] = i
        for m in l["modules"]:
            modules.setdefault(m, []).append(i)
        for d in l["dists"]:
            dists.setdefault(d, []).append(i)

    def place(index):
        # The directory is on sys.path already, but Python may have looked for it before it existed and
        # remembered that it did not: forget that.
        sys.path_importer_cache.pop(layers[index]["dir"], None)

    def pending(indexes):
        return [i for i in indexes if layers[i]["state"] != "ready"]

    def unlocked(wait):
        # Finders are asked with the global import lock held: waiting with it would stop every other
        # thread's imports (and fork). It is reentrant: released as often as this thread holds it.
        try:
            import _imp
        except ImportError:
            return wait()
        released = 0
        try:
            while released < 1000:
                _imp.release_lock()
                released += 1
        except RuntimeError:  # this thread holds it no more
            pass
        try:
            return wait()
        finally:
            for _ in range(released):
                _imp.acquire_lock()

    def settle(what, name, indexes):
        # Blocks until every layer in `indexes` is in place; ImportError naming the first that failed.
        waiting = pending(indexes)
        if not waiting:
            return
        try:
            answer = unlocked(lambda: ask("want %s %s" % (what, name)))
            states = answer["layers"]
        except Exception as e:
            raise ImportError("ferry: layer %s did not arrive: the node program cannot be asked (%s)"
                              % (", ".join(layers[i]["name"] for i in waiting), e), name=name)
        with lock:
            for l in states:
                i = int(l["index"])
                if layers[i]["state"] != "ready" and l["state"] == "ready":
                    layers[i]["state"] = "ready"
                    place(i)
                elif l["state"] == "failed":
                    layers[i]["state"] = "failed"
                    layers[i]["reason"] = l.get("reason", "")
            if not pending(layers):
                finder.leave()
        for i in indexes:
            l = layers[i]
            if l["state"] != "ready":
                raise ImportError("ferry: layer %s (%s) did not arrive: %s"
                                  % (l["name"], l["id"][:12], l.get("reason") or "the node program stopped"),
                                  name=name)

    def normalise(name):
        out, gap = [], False
        for c in name.lower():
            if c in "-_.":
                gap = True
                continue
            if gap and out:
                out.append("_")
            gap = False
            out.append(c)
        return "".join(out)

    class Finder(object):
        def find_spec(self, name, path=None, target=None):
            if path is None and name in modules:
                settle("module", name, modules[name])
            return None  # the normal finders go on, with the layer now in place

        def find_module(self, name, path=None):  # Pythons that ask for find_module only
            self.find_spec(name, path)
            return None

        def find_distributions(self, context=None):
            name = getattr(context, "name", None)
            if name is None:
                settle("dist", "*", list(layers))
            elif normalise(name) in dists:
                settle("dist", normalise(name), dists[normalise(name)])
            return iter(())

        def leave(self):
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass

    for i in sorted(layers):
        if layers[i]["state"] == "ready":
            place(i)
    finder = Finder()
    if pending(layers):
        sys.meta_path.insert(0, finder)

    dirs = tuple(os.path.join(l["dir"], "") for l in layers.values())

    def from_layer(module):
        # Loaded from a layer, not from the node's own Python (which may hold the same name).
        where = [getattr(module, "__file__", None) or ""] + list(getattr(module, "__path__", None) or [])
        return any(isinstance(w, str) and w.startswith(dirs) for w in where)

    def report():
        # sys.modules keeps the order names were first imported in.
        seen = [m for m, module in list(sys.modules.items())
                if "." not in m and m in modules and from_layer(module)]
        if seen:
            try:
                ask("imported " + " ".join(seen), timeout=10)
            except Exception:
                pass

    import atexit
    atexit.register(report)

    def wait_dir(path):
        # The layer that holds `path` (an editable install's target), in place.
        for d, i in by_dir.items():
            if path == d or path.startswith(os.path.join(d, "")):
                settle("layer", str(i), [i])

    # A sitecustomize of the project's own, in a layer still on its way, is waited for: _ferry_chain runs it.
    if "sitecustomize" in modules:
        try:
            settle("module", "sitecustomize", modules["sitecustomize"])
        except ImportError as e:
            sys.stderr.write("%s\n" % (e,))
    return wait_dir


def _ferry_site(spec, here, wait_dir):
    # sys.path as the workstation had it, the node's own site directories hidden while site-packages ship,
    # then the workstation's .pth import lines.
    import site

    def norm(p):
        return os.path.normcase(os.path.abspath(p)) if p else p

    site_dirs = []
    if hasattr(site, "getsitepackages"):
        site_dirs += site.getsitepackages()
    if getattr(site, "ENABLE_USER_SITE", False):
        site_dirs.append(site.getusersitepackages())
    site_dirs = set(norm(d) for d in site_dirs)
    node_stdlib, node_site, in_site = [], [], False
    for p in sys.path:
        if norm(p) == norm(here):
            continue
        in_site = in_site or norm(p) in site_dirs
        (node_site if in_site else node_stdlib).append(p)

    path, used = [], set()
    for slot in spec["path"]:
        if "dirs" in slot:
            path += slot["dirs"]
        elif "raw" in slot:
            path.append(slot["raw"])
        else:
            kind = "stdlib" if slot.get("stdlib") else "node_site"
            if kind not in used:
                used.add(kind)
                path += node_stdlib if kind == "stdlib" else node_site
    if spec.get("hide_node_site"):
        _ferry_hide([p for p in node_site if p not in path])
    sys.path[:] = path

    mapping = sorted(((local, node) for local, node in spec["dirs"]), key=lambda d: -len(d[0]))

    def to_node(p):
        for local, node in mapping:
            if p == local or p.startswith(os.path.join(local, "")):
                return node + p[len(local):]
        return p

    pointed = set()

    def point_editable_finders():
        # setuptools' finders hold the workstation's paths; the node's copies are in layers.
        for name, module in list(sys.modules.items()):
            if name in pointed or not (name.startswith("__editable__") and name.endswith("_finder")):
                continue
            pointed.add(name)
            found = getattr(module, "MAPPING", None)
            if isinstance(found, dict):
                for k, v in list(found.items()):
                    found[k] = to_node(v)
                    if wait_dir:
                        wait_dir(found[k])
            spaces = getattr(module, "NAMESPACES", None)
            if isinstance(spaces, dict):
                for k, v in list(spaces.items()):
                    spaces[k] = [to_node(p) for p in v]

    skip = None
    for imp in spec["imports"]:
        if imp["file"] == skip:
            continue
        try:
            # Under lazy start an import waits through the finder, but a line that looks in its own site
            # directory (a -nspkg.pth's does, through sitedir) needs its layer in place first.
            if wait_dir and "sitedir" in imp["line"]:
                wait_dir(imp["dir"])
            _ferry_addpackage(imp["dir"], imp["file"], imp["line"], vars(site))
        except Exception:
            # As site.addpackage says it, and the rest of that file is skipped.
            import traceback
            sys.stderr.write("Error processing line of %s:\n" % os.path.join(imp["dir"], imp["file"]))
            for record in traceback.format_exception(*sys.exc_info()):
                for line in record.splitlines():
                    sys.stderr.write("  " + line + "\n")
            sys.stderr.write("\nRemainder of file ignored\n")
            skip = imp["file"]
        point_editable_finders()


def _ferry_tracebacks(map_file):
    # Printed tracebacks name the workstation's files (the header says how).
    state = {}

    def pairs():
        if "pairs" not in state:
            state["pairs"] = []
            try:
                with open(map_file, "rb") as f:
                    found = _ferry_json(f.read().decode("utf-8"))
                state["pairs"] = sorted(((os.path.join(d, ""), os.path.join(l, "")) for d, l in found.items()),
                                        key=lambda p: -len(p[0]))
            except Exception:
                pass  # no map: tracebacks stay as they are
        return state["pairs"]

    def local(filename):
        if isinstance(filename, str):
            for node, here in pairs():
                if filename.startswith(node):
                    return here + filename[len(node):]
        return filename

    def touches(value, tb):
        # Some frame of the exception, its causes, contexts or group members, is in a layer.
        seen, todo = set(), [(value, tb)]
        while todo:
            value, tb = todo.pop()
            if id(value) in seen:
                continue
            seen.add(id(value))
            while tb is not None:
                name = tb.tb_frame.f_code.co_filename
                if local(name) != name:
                    return True
                tb = tb.tb_next
            more = [getattr(value, "__cause__", None), getattr(value, "__context__", None)]
            members = getattr(value, "exceptions", None)
            if isinstance(members, tuple):
                more += list(members)
            todo += [(e, e.__traceback__) for e in more if isinstance(e, BaseException)]
        return False

    def patch_traceback(module):
        summary = getattr(module, "StackSummary", None)
        original = getattr(summary, "format", None)
        if original is None or getattr(original, "_ferry", False):
            return

        def format(self, *args, **kwargs):
            try:
                import copy
                shown = type(self)()
                for frame in self:
                    there = local(frame.filename)
                    if there != frame.filename:
                        frame.line  # read from the node's copy before the name changes
                        frame = copy.copy(frame)
                        frame.filename = there
                    shown.append(frame)
            except Exception:
                shown = self
            return original(shown, *args, **kwargs)

        format._ferry = True
        summary.format = format

    def print_mapped(kind, value, tb, file=None):
        import traceback
        patch_traceback(traceback)
        traceback.print_exception(kind, value, tb, file=file)

    def excepthook(kind, value, tb):
        if not touches(value, tb):
            return sys.__excepthook__(kind, value, tb)
        try:
            print_mapped(kind, value, tb)
        except Exception:
            sys.__excepthook__(kind, value, tb)

    def patch_threading(module):
        original = getattr(module, "excepthook", None)
        if original is None or getattr(original, "_ferry", False):
            return

        def hook(args):
            # As threading's own prints it.
            if args.exc_type is SystemExit or not touches(args.exc_value, args.exc_traceback):
                return original(args)
            stderr = sys.stderr if sys.stderr is not None else getattr(args.thread, "_stderr", None)
            if stderr is None:
                return
            try:
                name = args.thread.name if args.thread is not None else module.get_ident()
                stderr.write("Exception in thread %s:\n" % (name,))
                print_mapped(args.exc_type, args.exc_value, args.exc_traceback, file=stderr)
                stderr.flush()
            except Exception:
                original(args)

        hook._ferry = True
        module.excepthook = hook

    watched = {"traceback": patch_traceback, "threading": patch_threading}
    for name in list(watched):
        if name in sys.modules:
            watched.pop(name)(sys.modules[name])

    class Loader(object):
        # The real loader's module, patched once it ran; the module keeps the real loader.
        def __init__(self, real, then):
            self.real, self.then = real, then

        def create_module(self, spec):
            create = getattr(self.real, "create_module", None)
            return create(spec) if create is not None else None

        def exec_module(self, module):
            module.__loader__ = self.real
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = self.real
            self.real.exec_module(module)
            self.then(module)

    class TracebackWatch(object):
        def find_spec(self, name, path=None, target=None):
            if path is not None or name not in watched:
                return None
            then = watched.pop(name)
            if not watched:
                self.leave()
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None) if finder is not self else None
                spec = find(name, path, target) if find is not None else None
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = Loader(spec.loader, then)
                    return spec
            return None

        def leave(self):
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass

    if watched:
        sys.meta_path.insert(0, TracebackWatch())
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = excepthook


def _ferry_addpackage(sitedir, name, line, site_globals):
    # A .pth line runs as site.addpackage runs it: with site's globals, and called from a frame whose locals
    # hold `sitedir` (the layer that holds the file), which a -nspkg.pth line reads through sys._getframe(1).
    exec(line, site_globals, {})


def _ferry_hide(hidden):
    # What the node's own site directories brought before this hook ran: modules loaded from them, and
    # the finders and path hooks those modules installed (Debian's _distutils_hack, say).
    dirs = tuple(os.path.join(os.path.abspath(d), "") for d in hidden if d)
    if not dirs:
        return
    def inside(where):
        return isinstance(where, str) and os.path.abspath(where).startswith(dirs)

    gone = set()
    for name, module in list(sys.modules.items()):
        # A namespace package made by a -nspkg.pth file has no file, only a path into those directories.
        places = [getattr(module, "__file__", None)] + list(getattr(module, "__path__", None) or [])
        places = [p for p in places if p]
        if places and all(inside(p) for p in places):
            gone.add(name)
            del sys.modules[name]

    def theirs(x):
        return (getattr(x, "__module__", None) or getattr(type(x), "__module__", None)) in gone

    sys.meta_path[:] = [f for f in sys.meta_path if not theirs(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if not theirs(h)]
    sys.path_importer_cache.clear()


def _ferry_forget(before):
    # What this hook imported for itself leaves sys.modules before the program's own code runs: the
    # closures keep what they use, and the program imports its own copies.
    for name in set(sys.modules) - before:
        if name != "sitecustomize":
            del sys.modules[name]


def _ferry_main():
    here = os.path.dirname(os.path.abspath(__file__))
    address = os.environ.get("FERRY_IMPORT_SOCKET")
    wait_dir = _ferry_lazy(address) if address else None
    site_file = os.environ.get("FERRY_SITE")
    spec = None
    if site_file:
        with open(site_file, "rb") as f:
            spec = _ferry_json(f.read().decode("utf-8"))
    _ferry_forget(_ferry_before)
    if spec is not None:
        _ferry_site(spec, here, wait_dir)
    if os.environ.get("FERRY_PATH_MAP"):
        _ferry_tracebacks(os.environ["FERRY_PATH_MAP"])


def _ferry_chain():
    # The sitecustomize this one hides, if any: it runs as it would have.
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if p and os.path.abspath(p) != here]
    before = set(sys.modules)
    try:
        # importlib's own frozen modules, loaded at every start: importlib.util would cost milliseconds.
        external, bootstrap = sys.modules.get("_frozen_importlib_external"), sys.modules.get("_frozen_importlib")
        if external is None or bootstrap is None:
            import importlib.machinery as external
            import importlib.util as bootstrap
        spec = external.PathFinder.find_spec("sitecustomize", rest)
        module = bootstrap.module_from_spec(spec) if spec is not None and spec.loader is not None else None
        _ferry_forget(before)
        if module is None:
            return
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as e:
        sys.stderr.write("ferry: the sitecustomize after ferry's failed: %r\n" % (e,))


try:
    _ferry_main()
except Exception as _ferry_error:  # never keep the program, or the sitecustomize after this one, from running
    sys.stderr.write("ferry: the import hook failed: %r\n" % (_ferry_error,))
_ferry_chain()
