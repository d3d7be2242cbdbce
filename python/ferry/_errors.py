"""The exceptions the ferry package raises of its own."""


class FerryError(Exception):
    """ferry could not do what was asked: the agent's error, a missing binary, a lost task."""


class TaskLostError(FerryError):
    """A task could not run: its retries were spent on lost nodes or workers."""


class RemoteTraceback(Exception):
    """The traceback of a task's exception on its node, chained as that exception's __cause__.

    Like concurrent.futures.process._RemoteTraceback: its str is the remote
    traceback, so Python's own report of the exception shows where it happened.
    """

    def __init__(self, tb):
        super().__init__(tb)
        self.tb = tb

    def __str__(self):
        return self.tb


class RemoteError(FerryError):
    """A task's exception that could not be unpickled here: its type name, message and traceback."""

    def __init__(self, type_name, message, traceback):
        super().__init__(type_name, message, traceback)
        self.type_name = type_name
        self.message = message
        self.traceback = traceback

    def __str__(self):
        return "%s: %s" % (self.type_name, self.message)
