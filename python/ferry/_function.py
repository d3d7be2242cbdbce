"""@ferry.function: a function that still runs locally, and on ferry's nodes with .remote/.map/.submit."""

import atexit
import functools
import importlib
import threading


def _imported(module, qualname):
    """On a node: the decorated function, imported from the shipped workspace as the workstation has it."""
    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _as_is(fn):
    return fn


class RemoteFunction:
    """The decorated function: one Executor per decorated function, started at the first remote use."""

    def __init__(self, fn, executor_options):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._options = dict(executor_options)
        self._executor = None
        self._lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __reduce__(self):
        # A decorated function of an importable module goes by reference, as an undecorated one does: its
        # module's name now holds this wrapper, which pickle would not find to be the function. One of
        # __main__ or a closure goes by value.
        module = getattr(self._fn, "__module__", None)
        if module and module != "__main__" and "<locals>" not in self.__qualname__:
            return (_imported, (module, self.__qualname__))
        return (_as_is, (self._fn,))

    def executor(self):
        with self._lock:
            if self._executor is None:
                from ._executor import Executor
                self._executor = Executor(**self._options)
                atexit.register(self._executor.shutdown)
            return self._executor

    def submit(self, *args, **kwargs):
        return self.executor().submit(self, *args, **kwargs)

    def remote(self, *args, **kwargs):
        """Run once on a node and return its value."""
        return self.submit(*args, **kwargs).result()

    def map(self, *iterables, ordered=True, return_exceptions=False, chunksize=None):
        """As ferry.map, on this function's executor."""
        from ._map import MapRun
        run = MapRun(self.executor(), self, iterables, ordered=ordered,
                     return_exceptions=return_exceptions, chunksize=chunksize)
        try:
            yield from run
        finally:
            run.close()


def function(fn=None, **executor_options):
    """@ferry.function or @ferry.function(nodes=2, retries=1, ...)."""
    if fn is None:
        return lambda f: RemoteFunction(f, executor_options)
    return RemoteFunction(fn, executor_options)
