# ferry's import hook for a command started before its environment has landed (lazy start).
#
# The node program puts this file first on PYTHONPATH, so Python's `site` imports it at start-up and the
# user changes no code. Every layer's directory is on PYTHONPATH already, in the plan's order, whether it
# has landed or not (a layer appears whole, by a rename): sys.path is the one an eager start gives. This
# hook asks the node program (FERRY_IMPORT_SOCKET) which names each layer holds and which layers are in
# place, and goes first on sys.meta_path. An import of a top-level name whose layer is still on its way
# then waits until the node program says it landed (that layer goes to the front of the node's queue), and
# proceeds as a normal import; a layer that failed raises ImportError naming it and why. importlib.metadata
# waits the same way for a distribution's layer. Names no layer holds fall through at once. Once every
# layer is in place the finder leaves sys.meta_path: it costs nothing from then on. At exit, the top-level
# names the program imported, in the order it first imported them, go to the node program: the next run
# fetches those layers first.
#
# A wait releases CPython's global import lock (held while finders are asked), so other threads import
# meanwhile. Written for every Python 3 a node may have (3.5 on): no f-strings, the standard library only.
# Then the next sitecustomize on the path, if there is one, runs as it would have without this one.
import os
import sys


def _ferry_main():
    address = os.environ.get("FERRY_IMPORT_SOCKET")
    if not address:
        return
    import json
    import socket
    import threading

    home = os.path.dirname(os.path.abspath(__file__))
    lock = threading.Lock()

    def ask(line, timeout=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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
            return json.loads(b"".join(chunks).decode("utf-8"))
        finally:
            s.close()

    try:
        catalogue = ask("hello %d" % os.getpid(), timeout=30)
        layers = dict((int(l["index"]), l) for l in catalogue["layers"])
    except Exception as e:  # the node program is gone: what is on the path is all there is
        sys.stderr.write("ferry: the import hook cannot reach the node program (%s)\n" % (e,))
        return
    modules = {}  # top-level name -> indexes of the layers that hold it
    dists = {}  # normalised distribution name -> indexes
    for i, l in layers.items():
        for m in l["modules"]:
            modules.setdefault(m, []).append(i)
        for d in l["dists"]:
            dists.setdefault(d, []).append(i)

    def place(index):
        # The directory is on sys.path (from PYTHONPATH), but Python may have looked for it before it
        # existed and remembered that it did not: forget that. Put back only if the program removed it.
        path = layers[index]["dir"]
        sys.path_importer_cache.pop(path, None)
        if path in sys.path:
            return
        at = len(sys.path)
        for i in sorted(layers):
            if i > index and layers[i]["dir"] in sys.path:
                at = sys.path.index(layers[i]["dir"])
                break
        sys.path.insert(at, path)

    for i in sorted(layers):
        if layers[i]["state"] == "ready":
            place(i)

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

    # A sitecustomize of the project's own, in a layer still on its way, is waited for: _ferry_chain runs it.
    if "sitecustomize" in modules:
        try:
            settle("module", "sitecustomize", modules["sitecustomize"])
        except ImportError as e:
            sys.stderr.write("%s\n" % (e,))


def _ferry_chain():
    # The sitecustomize this one hides, if any: it runs as it would have.
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if p and os.path.abspath(p) != here]
    try:
        import importlib.machinery
        import importlib.util
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as e:
        sys.stderr.write("ferry: the sitecustomize after ferry's failed: %r\n" % (e,))


try:
    _ferry_main()
except Exception as _ferry_error:  # never keep the program, or the sitecustomize after this one, from running
    sys.stderr.write("ferry: the import hook failed: %r\n" % (_ferry_error,))
_ferry_chain()
