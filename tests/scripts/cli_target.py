"""A program for the CLI tests: prints what python would give it, burns CPU, exits as told."""

import json
import os
import sys
import time


def hot_function(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        for i in range(1000):
            n += i * i
    return n


def main():
    info = {"argv": sys.argv, "path0": sys.path[0], "name": __name__, "cwd": os.getcwd()}
    print("TARGET " + json.dumps(info), flush=True)
    hot_function(float(os.environ.get("BURN", "0.3")))
    action = os.environ.get("ACTION", "")
    if action == "raise":
        raise ValueError("boom from the target")
    if action == "exit3":
        sys.exit(3)
    if action == "sigterm":
        import signal

        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    if action == "interrupt":
        raise KeyboardInterrupt


if __name__ == "__main__":
    main()
