"""The one agent process of an executor (`ferry api`) and the frames to and from it.

One writer thread owns the agent's stdin, so that no caller ever blocks on a
full pipe while holding the executor's state (the agent may be waiting for us
to read its results); one reader thread parses the agent's stdout.
"""

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading

from ._errors import FerryError
from ._worker import FrameReader, ProtocolError, encode_frame

# After Ctrl-C, how long the agent has to stop the workers, abort uploads and
# close its trace before it is killed.
INTERRUPT_GRACE_SECONDS = 10.0


def find_agent_binary(environ=None):
    environ = os.environ if environ is None else environ
    path = environ.get("FERRY_BIN")
    if path:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise FerryError("FERRY_BIN is %s, which is not an executable file" % path)
        return path
    found = shutil.which("ferry", path=environ.get("PATH"))
    if found is None:
        raise FerryError("the ferry binary was not found: set FERRY_BIN to its path, or put it on PATH")
    return found


def agent_argv(binary, config=None, nodes=None, concurrency=None, provider=None, env=None, retries=0):
    """`ferry [--config FILE] api [--nodes N] [--concurrency K] --retries R [--provider P] [--env NAME]...`."""
    argv = [binary]
    if config is not None:
        argv += ["--config", os.fspath(config)]
    argv.append("api")
    for flag, value in (("--nodes", nodes), ("--concurrency", concurrency)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError("%s must be a positive integer, not %r" % (flag[2:], value))
            argv += [flag, str(value)]
    # Always given: the executor's default (no retries) is not the configuration's (agent.retries).
    argv += ["--retries", str(retries)]
    if provider is not None:
        argv += ["--provider", str(provider)]
    # The names alone: the values go in the agent's environment (agent_environ), never in an argv that
    # every user of this machine can read.
    for key in env or {}:
        key = str(key)
        if not key or "=" in key:
            raise ValueError("env: %r is not a variable name" % key)
        argv += ["--env", key]
    return argv


def agent_environ(environ=None, task_env=None):
    """The agent packs the environment of this interpreter, and passes task_env's values on to the workers."""
    env = dict(os.environ if environ is None else environ)
    env["FERRY_PACKAGING_PYTHON"] = sys.executable
    for key, value in (task_env or {}).items():
        env[str(key)] = str(value)
    return env


class AgentConnection:
    """The agent process; on_frame(kind, id, payload) and on_exit(error or None) run on the reader thread."""

    def __init__(self, argv, env, on_frame, on_exit):
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                                         bufsize=0, env=env)
        except OSError as exc:
            raise FerryError("cannot start %s: %s" % (argv[0], exc)) from exc
        self._on_frame = on_frame
        self._on_exit = on_exit
        self._outbox = queue.SimpleQueue()
        self.fatal = None
        self._writer = threading.Thread(target=self._write_loop, name="ferry-agent-writer", daemon=True)
        self._reader = threading.Thread(target=self._read_loop, name="ferry-agent-reader", daemon=True)
        self._writer.start()
        self._reader.start()

    def send(self, kind, frame_id, payload=b""):
        self._outbox.put(encode_frame(kind, frame_id, payload))

    def close_input(self):
        """No more frames: the agent's stdin ends after what is queued."""
        self._outbox.put(None)

    def _write_loop(self):
        fd = self.proc.stdin.fileno()
        try:
            while True:
                data = self._outbox.get()
                if data is None:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
        except OSError:
            pass  # the agent is gone; the reader reports how it ended
        finally:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def _read_loop(self):
        error = None
        try:
            frames = FrameReader(self.proc.stdout.fileno())
            while True:
                frame = frames.read_frame()
                if frame is None:
                    break
                if frame[0] == "X":
                    self.fatal = frame[2].decode("utf-8", "replace").strip()
                    continue
                self._on_frame(*frame)
        except (ProtocolError, OSError) as exc:
            error = "the ferry agent's output broke the protocol: %s" % exc
        finally:
            # The agent's output ended: it ends too, and must not wait for more frames from here.
            self._outbox.put(None)
            code = self.proc.wait() if error is None else self._stop_after_error()
            if self.fatal:
                error = self.fatal
            elif error is None and code != 0:
                error = "the ferry agent exited with code %d" % code
            self._on_exit(FerryError(error) if error else None)

    def _stop_after_error(self):
        self.proc.kill()
        return self.proc.wait()

    def exited(self):
        return self.proc.poll() is not None

    def wait(self, timeout=None):
        """Wait until the agent exited and its reader delivered everything."""
        self._reader.join(timeout)
        return not self._reader.is_alive()

    def interrupt(self):
        """Ctrl-C: SIGINT to the agent (it may have one from the terminal already), then SIGKILL if slow."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            self.proc.wait(INTERRUPT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        except KeyboardInterrupt:  # a second Ctrl-C: do not wait any more
            self.proc.kill()
            raise
        finally:
            self._outbox.put(None)
