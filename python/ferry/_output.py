"""The output of tasks: lines on the local stderr prefixed by node and task, or kept on futures."""

import sys
import threading


class OutputRouter:
    """Whole lines per (task, stream) on stderr as `[NODE #TASK] line`; or the text on the future.

    A partial line waits for its end, or for the end of its task, so two tasks'
    lines never mix within one line.
    """

    def __init__(self, capture, stream=None, before_write=None):
        self._capture = capture
        self._stream = stream
        self._before_write = before_write  # erases the progress line, which is drawn again after
        self._partial = {}
        self._lock = threading.Lock()

    def feed(self, task_id, label, node, stream_no, data, future):
        text = data.decode("utf-8", "replace")
        if self._capture:
            if future is not None:
                future.output += text
            return
        key = (task_id, stream_no)
        with self._lock:
            pending = self._partial.pop(key, ("", node))[0] + text
            cut = pending.rfind("\n")
            if cut < 0:
                self._partial[key] = (pending, node)
                return
            if cut + 1 < len(pending):
                self._partial[key] = (pending[cut + 1:], node)
            self._write(node, label, pending[:cut + 1])

    def end_task(self, task_id, label):
        """The task answered: its partial lines are complete."""
        if self._capture or not self._partial:
            return
        with self._lock:
            for stream_no in (1, 2):
                entry = self._partial.pop((task_id, stream_no), None)
                if entry is not None:
                    self._write(entry[1], label, entry[0] + "\n")

    def _write(self, node, label, lines):
        if self._before_write is not None:
            self._before_write()
        stream = self._stream or sys.stderr
        prefix = "[%s #%d] " % (node, label)
        stream.write("".join(prefix + line + "\n" for line in lines[:-1].split("\n")))
        stream.flush()
