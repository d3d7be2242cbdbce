"""A process started by ferry that continues ferry's task (FERRY_TASK_ID) with eliot.

Usage: eliot_child.py TRACE_FILE
"""
import os
import sys

from eliot import Action, start_action, to_file


def main():
    to_file(open(sys.argv[1], "w"))
    with Action.continue_task(task_id=os.environ["FERRY_TASK_ID"]):
        with start_action(action_type="python:work", items=3):
            pass


if __name__ == "__main__":
    main()
