"""ferry: map Python functions over ferry's nodes (docs/python-api.md)."""

from ._errors import FerryError, RemoteError, RemoteTraceback, TaskLostError
from ._executor import Executor, Future
from ._function import RemoteFunction, function
from ._map import MapRun

__all__ = ["Executor", "FerryError", "Future", "RemoteError", "RemoteFunction", "RemoteTraceback",
           "TaskLostError", "function", "map"]


def map(fn, *iterables, ordered=True, return_exceptions=False, progress=None, chunksize=None,
        **executor_options):
    """A generator of fn's results over the iterables, on an executor of its own.

    ordered=False yields results as they complete; return_exceptions=True
    yields a failed item's exception instead of raising it.
    """
    executor = Executor(progress=progress, **executor_options)
    run = None
    try:
        run = MapRun(executor, fn, iterables, ordered=ordered, return_exceptions=return_exceptions,
                     chunksize=chunksize)
        yield from run
    except KeyboardInterrupt:
        executor._interrupt()
        raise
    finally:
        if run is not None:
            run.close()
        executor.shutdown(wait=True, cancel_futures=True)
