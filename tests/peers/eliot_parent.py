"""An orchestrator that uses eliot: it starts an action and runs a command inside it with
FERRY_TASK_ID set to its serialised task id, so the command's actions join its task.

Usage: eliot_parent.py TRACE_FILE COMMAND ARGS... (exits with the command's exit code)
"""
import os
import subprocess
import sys

from eliot import start_action, to_file


def main():
    to_file(open(sys.argv[1], "w"))
    with start_action(action_type="python:orchestrate") as action:
        env = dict(os.environ, FERRY_TASK_ID=action.serialize_task_id().decode("ascii"))
        code = subprocess.call(sys.argv[2:], env=env)
        action.add_success_fields(exit_code=code)
    sys.exit(code)


if __name__ == "__main__":
    main()
