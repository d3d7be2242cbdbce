"""Pickling of functions, arguments and results for the frames of docs/python-api.md.

Functions go through cloudpickle (by value for __main__, lambdas and closures,
by reference for importable functions) once per executor. Arguments go through
plain pickle, which is much faster, and through cloudpickle only when plain
pickle fails. A top-level argument whose pickle is over 1 MiB becomes a blob,
sent once and named in the task's pickle by a persistent id.
"""

import io
import itertools
import pickle
import threading

from ._errors import FerryError, RemoteError, RemoteTraceback
from ._worker import BLOB_TAG

try:
    import cloudpickle
except ImportError:
    cloudpickle = None

PROTOCOL = 5
BLOB_THRESHOLD = 1 << 20
INSTALL_HINT = "install cloudpickle (Debian: python3-cloudpickle)"


def _needs_pickling_by_value(fn):
    """What plain pickle cannot send by name: a lambda, a closure, a function of __main__."""
    qualname = getattr(fn, "__qualname__", "") or ""
    return (getattr(fn, "__module__", None) == "__main__" or "<locals>" in qualname
            or "<lambda>" in qualname)


def dumps_function(fn):
    if cloudpickle is not None:
        try:
            return cloudpickle.dumps(fn, protocol=PROTOCOL)
        except Exception as exc:
            raise FerryError("cannot pickle the function %r: %s" % (fn, exc)) from exc
    name = getattr(fn, "__qualname__", repr(fn))
    if _needs_pickling_by_value(fn):
        raise FerryError("%s is a lambda, a closure or a function of __main__, which only cloudpickle "
                         "can send to a node: %s" % (name, INSTALL_HINT))
    try:
        return pickle.dumps(fn, protocol=PROTOCOL)
    except Exception as exc:
        raise FerryError("cannot pickle the function %s without cloudpickle (%s): %s"
                         % (name, exc, INSTALL_HINT)) from exc


# Plain pickle names a class or function of the script by reference, as __main__.NAME, which the worker's
# __main__ (the worker itself) does not hold: such a pickle goes by value through cloudpickle instead. A
# pickle that merely holds the text "__main__" takes the slower path too, and is still right.
_MAIN = b"__main__"


def _names_main(data):
    return _MAIN in data


def dumps(obj):
    try:
        data = pickle.dumps(obj, protocol=PROTOCOL)
        if cloudpickle is None or not _names_main(data):
            return data
    except Exception:
        if cloudpickle is None:
            raise
    return cloudpickle.dumps(obj, protocol=PROTOCOL)


class FunctionTable:
    """Function -> id, each function pickled once per executor.

    Keyed by id() with a strong reference held, so the id stays the object's;
    not a WeakKeyDictionary: builtins and many callables refuse weak references.
    """

    def __init__(self):
        self._ids = {}
        self._next = itertools.count(1)

    def lookup(self, fn):
        """(function id, pickle to send first or None when it was sent already)."""
        entry = self._ids.get(id(fn))
        if entry is not None and entry[0] is fn:
            return entry[1], None
        data = dumps_function(fn)
        fn_id = next(self._next)
        self._ids[id(fn)] = (fn, fn_id)
        return fn_id, data


def _blob_pickler_class(base):
    class BlobPickler(base):
        """Writes the cached large objects as ("ferry-blob", id) and notes the ids used."""

        def __init__(self, f, cache):
            base.__init__(self, f, protocol=PROTOCOL)
            self.cache = cache
            self.used = []

        def persistent_id(self, obj):
            entry = self.cache.get(id(obj))
            if entry is None or entry[0] is not obj:
                return None
            if entry[1] not in self.used:
                self.used.append(entry[1])
            return (BLOB_TAG, entry[1])

    return BlobPickler


_PlainBlobPickler = _blob_pickler_class(pickle.Pickler)
_CloudBlobPickler = _blob_pickler_class(cloudpickle.CloudPickler) if cloudpickle is not None else None


class ArgumentPacker:
    """Pickles a task's arguments, sending each large top-level argument once as a blob.

    The cache is keyed by id() and holds the object, so the SAME object passed
    to 1,000 tasks is pickled and sent once. (An object changed in place after
    its first task is not sent again: as with any shared argument.)
    """

    def __init__(self, threshold=BLOB_THRESHOLD):
        self._threshold = threshold
        self._blobs = {}
        self._next = itertools.count(1)
        self._lock = threading.Lock()

    def pack(self, work, top_level):
        """(arguments pickle, blob ids it uses, [(blob id, blob pickle)] to send before it).

        work is what the worker unpickles ((args, kwargs), or a chunk's list of
        them); top_level the arguments that may become blobs.
        """
        blobs = self._blobs
        if not blobs or not any(id(o) in blobs for o in top_level):
            data = dumps(work)
            if len(data) <= self._threshold:
                return data, [], []  # the common path: one plain pickle
        new = []
        with self._lock:
            # Taken as sent only once the task's own pickle is made: a task that fails to pickle leaves no
            # blob behind that later tasks would name but no frame brought.
            known = dict(blobs)
            for obj in top_level:
                if id(obj) in known:
                    continue
                blob = dumps(obj)
                if len(blob) > self._threshold:
                    blob_id = next(self._next)
                    known[id(obj)] = (obj, blob_id)
                    new.append((blob_id, blob))
            data, used = self._dumps_with_blobs(work, known)
            blobs.update(known)
        return data, used, new

    def _dumps_with_blobs(self, work, blobs):
        f = io.BytesIO()
        pickler = _PlainBlobPickler(f, blobs)
        try:
            pickler.dump(work)
            data = f.getvalue()
            if _CloudBlobPickler is None or not _names_main(data):
                return data, pickler.used
        except Exception:
            if _CloudBlobPickler is None:
                raise
        f = io.BytesIO()
        pickler = _CloudBlobPickler(f, blobs)
        pickler.dump(work)
        return f.getvalue(), pickler.used


def exception_from_record(record):
    """The task's own exception, its remote traceback chained as __cause__; else RemoteError."""
    exc_pickle, type_name, message, tb_text = record
    exc = None
    if exc_pickle is not None:
        try:
            exc = pickle.loads(exc_pickle)
        except Exception:
            exc = None
        if not isinstance(exc, BaseException):
            exc = None
    if exc is None:
        exc = RemoteError(type_name, message, tb_text)
    exc.__cause__ = RemoteTraceback(tb_text)
    return exc
