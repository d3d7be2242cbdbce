"""The node worker of ferry's Python API, and the one frame codec in Python.

On a node, the agent runs this file with python3 and speaks frames to it on
stdin/stdout (docs/python-api.md): functions, blobs and tasks in, results and
output out. The worker runs one task at a time, in the order they came.

This file is also imported by the client (``from ferry._worker import
FrameReader, write_frame``) so that both ends share one codec; importing it has
no side effects. It must run on every Python 3 from 3.6: no walrus, no 3.9+
syntax, and no import of the ferry package (it ships alone, inside the node
program).
"""

import hashlib
import io
import json
import os
import pickle
import struct
import sys
import threading
import traceback

# u32 payload size, u8 kind, u64 id: little-endian, no padding.
HEADER = struct.Struct("<IBQ")
MAX_PAYLOAD = 1 << 30
_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")
# u64 function id, u8 flags, u16 number of blobs (the client's task header).
_TASK_HEAD = struct.Struct("<QBH")

FLAG_CHUNK = 1
FLAG_CAPTURE = 2

OUTCOME_VALUE = 0
OUTCOME_EXCEPTION = 1
OUTCOME_LOST = 2

BLOB_TAG = "ferry-blob"

_READ_SIZE = 1 << 20


class ProtocolError(Exception):
    """A frame that breaks docs/python-api.md: the peer is not speaking the protocol."""


def encode_frame(kind, frame_id, payload=b""):
    """The bytes of one frame; kind is a one-letter str."""
    return HEADER.pack(len(payload), ord(kind), frame_id) + payload


def write_all(fd, data):
    """os.write until every byte is out (a pipe takes large writes in parts)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_frame(fd, kind, frame_id, payload=b""):
    """Write one frame with as few system calls as the pipe allows."""
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError("a frame of %d bytes is over the 1 GiB limit" % len(payload))
    write_all(fd, encode_frame(kind, frame_id, payload))


class FrameReader(object):
    """Reads frames from a file descriptor with its own buffer.

    os.read on the raw descriptor, not sys.stdin: on a node the shell has
    already consumed the environment lines before it exec'd python, and a
    buffered reader of ours must not steal bytes from anyone else.
    """

    def __init__(self, fd):
        self._fd = fd
        self._buf = bytearray()
        self._pos = 0

    def _fill(self, need):
        """Make `need` bytes available from _pos; False at EOF before that."""
        while len(self._buf) - self._pos < need:
            if self._pos:
                del self._buf[:self._pos]
                self._pos = 0
            chunk = os.read(self._fd, max(_READ_SIZE, need - len(self._buf)))
            if not chunk:
                return False
            self._buf += chunk
        return True

    def read_frame(self):
        """(kind, id, payload bytes), or None at a clean EOF between frames."""
        if not self._fill(HEADER.size):
            if len(self._buf) - self._pos:
                raise ProtocolError("the stream ended inside a frame header")
            return None
        size, kind, frame_id = HEADER.unpack_from(self._buf, self._pos)
        if size > MAX_PAYLOAD:
            raise ProtocolError("a frame announces %d bytes, over the 1 GiB limit" % size)
        if not self._fill(HEADER.size + size):
            raise ProtocolError("the stream ended inside a frame of %d bytes" % size)
        start = self._pos + HEADER.size
        payload = bytes(self._buf[start:start + size])
        self._pos = start + size
        return chr(kind), frame_id, payload


def read_frame(reader):
    """The next frame of a FrameReader (see FrameReader.read_frame)."""
    return reader.read_frame()


def parse_task(payload):
    """Split a client task payload: (function id, flags, blob ids, pickled arguments)."""
    fn_id, flags, nblobs = _TASK_HEAD.unpack_from(payload, 0)
    offset = _TASK_HEAD.size
    blob_ids = list(struct.unpack_from("<%dQ" % nblobs, payload, offset)) if nblobs else []
    offset += 8 * nblobs
    return fn_id, flags, blob_ids, memoryview(payload)[offset:]


def pack_task(fn_id, flags, blob_ids, args_pickle):
    """The client's task payload (the inverse of parse_task)."""
    head = _TASK_HEAD.pack(fn_id, flags, len(blob_ids))
    if blob_ids:
        head += struct.pack("<%dQ" % len(blob_ids), *blob_ids)
    return head + args_pickle


# ---------------------------------------------------------------- the worker

try:  # by-value functions and classes need it; plain pickle covers the rest
    import cloudpickle as _cloudpickle
except ImportError:  # pragma: no cover - depends on the node
    _cloudpickle = None


def dumps_value(value):
    """Plain pickle is much faster; cloudpickle handles what it cannot."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        if _cloudpickle is None:
            raise
        return _cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _user_frames(tb):
    """The traceback from the task's own code on: the worker's frames above it say nothing to the user."""
    own = _user_frames.__code__.co_filename
    while tb is not None and tb.tb_frame.f_code.co_filename == own and tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def exception_record(exc):
    """(exception pickle or None, type name, message, traceback text)."""
    tb_text = "".join(traceback.format_exception(type(exc), exc, _user_frames(exc.__traceback__)))
    exc_type = type(exc)
    type_name = "%s.%s" % (exc_type.__module__, exc_type.__qualname__)
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable %s>" % exc_type.__name__
    try:
        # cloudpickle keeps the identity of classes the client sent by value,
        # so the client gets its own class back; the traceback stays here.
        pickler = _cloudpickle if _cloudpickle is not None else pickle
        exc_pickle = pickler.dumps(exc.with_traceback(None), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        exc_pickle = None
    return (exc_pickle, type_name, message, tb_text)


class _OutputSink(io.RawIOBase):
    """fd-less stdout/stderr of the worker: whole lines become O frames of the current task."""

    def __init__(self, worker, stream):
        io.RawIOBase.__init__(self)
        self._worker = worker
        self._stream = stream
        self._pending = bytearray()

    def writable(self):
        return True

    def write(self, data):
        # Under the worker's lock: a thread of the task (logging, a progress bar) prints beside the main one.
        with self._worker.lock:
            self._pending += data
            cut = self._pending.rfind(b"\n")
            if cut >= 0:
                self._send(cut + 1)
        return len(data)

    def flush(self):
        with self._worker.lock:
            if self._pending:
                self._send(len(self._pending))

    def _send(self, upto):
        data = bytes(self._pending[:upto])
        del self._pending[:upto]
        self._worker.send_output(self._stream, data)


class _BlobStore(object):
    """Blob id -> object: memory, else the node cache file, else one download per node."""

    def __init__(self):
        self._specs = {}
        self._objects = {}

    def add(self, blob_id, spec_json):
        spec = json.loads(spec_json.decode("utf-8"))
        self._specs[blob_id] = spec
        if spec.get("fetch"):
            # For the node's children in the job's fan-out, who ask this node's server for it: now, beside
            # the tasks. A task that needs it meanwhile waits on the same lock.
            threading.Thread(target=_fetch_quietly, args=(spec,), daemon=True).start()

    def load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 2 and pid[0] == BLOB_TAG):
            raise pickle.UnpicklingError("unknown persistent id %r" % (pid,))
        blob_id = pid[1]
        obj = self._objects.get(blob_id)
        if obj is None and blob_id not in self._objects:
            spec = self._specs.get(blob_id)
            if spec is None:
                raise pickle.UnpicklingError("blob %d was not announced before its task" % blob_id)
            with open(fetch_blob(spec), "rb") as f:
                obj = pickle.load(f)
            self._objects[blob_id] = obj
        return obj


def fetch_blob(spec):
    """The path of a blob's verified file in the node cache, downloading it if absent.

    All workers of a node share the cache: the first takes an flock on
    path + ".lock" and downloads; the others wait on the lock and find the file.
    It comes from the node's parent in the job's fan-out when the spec names
    one ("peer", with the job's "token"), else or on any failure there from
    storage ("url"); the sha256 is checked whatever the source. A fetch that
    failed both ways leaves path + ".failed", so that the node's server turns
    away the children that wait for it.
    """
    path = spec["path"]
    if os.path.exists(path):
        return path
    import fcntl
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, exist_ok=True)
    with open(path + ".lock", "ab") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if os.path.exists(path):  # another worker fetched it while we waited
            return path
        _forget(path + ".failed")
        sources = []
        if spec.get("peer"):
            sources.append(("its node's parent", spec["peer"], {"x-ferry-token": spec.get("token", "")}))
        sources.append(("storage", spec["url"], {}))
        errors = []
        for name, url, headers in sources:
            try:
                _download(url, headers, spec["sha256"], directory, path, spec.get("timeout"))
                return path
            except Exception as exc:  # any failure of a source: the next one
                errors.append("%s: %s" % (name, exc))
        with open(path + ".failed", "ab"):
            pass
        raise IOError("blob %s: %s" % (path, "; ".join(errors)))


def _fetch_quietly(spec):
    try:
        fetch_blob(spec)
    except Exception:  # the task that needs it tries again, and says why
        pass


def _forget(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _download(url, headers, sha256, directory, path, timeout=None):
    """Download `url` into `path` if its bytes have the sha256; nothing is left behind otherwise.

    `timeout`: seconds without a byte (agent.download_timeout) before the source is given up on."""
    import tempfile
    import urllib.request
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".blob-")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
            try:
                while True:
                    block = response.read(_READ_SIZE)
                    if not block:
                        break
                    digest.update(block)
                    out.write(block)
            finally:
                response.close()
        if digest.hexdigest() != sha256:
            raise IOError("the download's sha256 is %s, not %s" % (digest.hexdigest(), sha256))
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            os.unlink(tmp)


class Worker(object):
    def __init__(self, proto_out, frames):
        self._out = proto_out
        # Every frame written, and the output sinks' buffers: the task's own threads write too. Reentrant: a
        # sink that sends a frame holds it already.
        self.lock = threading.RLock()
        self._frames = frames
        self._fn_pickles = {}
        self._fns = {}
        self._blobs = _BlobStore()
        self._task_id = 0
        self._stdout = _OutputSink(self, 1)
        self._stderr = _OutputSink(self, 2)

    def install_streams(self):
        # line_buffering + write_through: every print reaches the sink at once;
        # the sink itself cuts whole lines, so frames do not split lines.
        sys.stdout = io.TextIOWrapper(self._stdout, encoding="utf-8", errors="backslashreplace",
                                      line_buffering=True, write_through=True)
        sys.stderr = io.TextIOWrapper(self._stderr, encoding="utf-8", errors="backslashreplace",
                                      line_buffering=True, write_through=True)

    def send_output(self, stream, data):
        with self.lock:
            write_frame(self._out, "O", self._task_id, bytes((stream,)) + data)

    def hello(self):
        info = {"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "pid": os.getpid()}
        write_frame(self._out, "H", 0, json.dumps(info).encode("utf-8"))

    def serve(self):
        """Frames until E or EOF. Returns the exit code."""
        while True:
            frame = self._frames.read_frame()
            if frame is None:
                return 0
            kind, frame_id, payload = frame
            if kind == "T":
                if not self._run_task(frame_id, payload):
                    return 130
            elif kind == "F":
                self._fn_pickles[frame_id] = payload
            elif kind == "B":
                self._blobs.add(frame_id, payload)
            elif kind == "E":
                return 0
            else:
                raise ProtocolError("unexpected frame kind %r" % kind)

    def _function(self, fn_id):
        fn = self._fns.get(fn_id)
        if fn is None:
            data = self._fn_pickles.get(fn_id)
            if data is None:
                raise LookupError("function %d was not sent before its task" % fn_id)
            fn = pickle.loads(data)  # lazily: a function no task uses is never imported
            self._fns[fn_id] = fn
            del self._fn_pickles[fn_id]
        return fn

    def _load_args(self, blob_ids, data):
        if not blob_ids:
            return pickle.loads(data)
        unpickler = pickle.Unpickler(io.BytesIO(data))
        unpickler.persistent_load = self._blobs.load
        return unpickler.load()

    def _run_task(self, task_id, payload):
        """Run one T frame and answer it. False when the worker must exit (KeyboardInterrupt)."""
        (n,) = _U16.unpack_from(payload, 0)
        eliot_id = payload[2:2 + n].decode("utf-8", "replace")
        body = memoryview(payload)[2 + n:]  # no copy of large arguments
        self._task_id = task_id
        os.environ["FERRY_TASK_ID"] = eliot_id
        keep_going = True
        try:
            fn_id, flags, blob_ids, args_data = parse_task(body)
            fn = self._function(fn_id)
            work = self._load_args(blob_ids, args_data)
        except BaseException as exc:
            keep_going = not isinstance(exc, KeyboardInterrupt)
            self._finish(task_id, OUTCOME_EXCEPTION, pickle.dumps(exception_record(exc)))
            return keep_going
        if flags & FLAG_CHUNK:
            outcomes = []
            for args, kwargs in work:
                try:
                    outcomes.append((OUTCOME_VALUE, fn(*args, **kwargs)))
                except BaseException as exc:
                    outcomes.append((OUTCOME_EXCEPTION, exception_record(exc)))
                    if isinstance(exc, KeyboardInterrupt):
                        keep_going = False
                        break
            self._finish(task_id, OUTCOME_VALUE, self._dump_chunk(outcomes))
            return keep_going
        args, kwargs = work
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:
            self._finish(task_id, OUTCOME_EXCEPTION, pickle.dumps(exception_record(exc)))
            return not isinstance(exc, KeyboardInterrupt)
        try:
            data = dumps_value(value)
        except Exception as exc:
            self._finish(task_id, OUTCOME_EXCEPTION, pickle.dumps(exception_record(exc)))
            return True
        self._finish(task_id, OUTCOME_VALUE, data)
        return True

    @staticmethod
    def _dump_chunk(outcomes):
        try:
            return dumps_value(outcomes)
        except Exception:
            pass
        # One value that cannot be pickled must not take its neighbours down.
        fixed = []
        for outcome in outcomes:
            try:
                dumps_value(outcome)
                fixed.append(outcome)
            except Exception as exc:
                fixed.append((OUTCOME_EXCEPTION, exception_record(exc)))
        return dumps_value(fixed)

    def _finish(self, task_id, outcome, data):
        # Output before the result: the client sees a task's lines before it is done.
        self._flush_output()
        with self.lock:  # a frame goes out whole, whatever the task's threads print meanwhile
            write_all(self._out, HEADER.pack(len(data) + 1, ord("R"), task_id) + bytes((outcome,)) + data)
        self._task_id = 0

    def _flush_output(self):
        for stream, sink in ((sys.stdout, self._stdout), (sys.stderr, self._stderr)):
            try:
                stream.flush()
            except Exception:
                pass
            sink.flush()


def main():
    # Keep the protocol on private descriptors, then point fd 1 at stderr and fd 0 at /dev/null, so that
    # C code writing to fd 1 can never corrupt a frame, and a program a task starts that reads its stdin
    # (input(), a command-line tool) can never take one.
    proto_out = os.dup(1)
    proto_in = os.dup(0)
    for fd in (proto_out, proto_in):
        os.set_inheritable(fd, False)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    worker = Worker(proto_out, FrameReader(proto_in))
    worker.install_streams()
    worker.hello()
    return worker.serve()


if __name__ == "__main__":
    code = main()
    # Now, whatever threads the tasks left running: a normal exit would wait for them, and the agent for it.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code or 0)
