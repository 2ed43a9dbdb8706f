"""A program for the CLI's exit-signal tests: a worker thread burns CPU in `worker_burn`, and
the main thread waits the way argv[1] says, printing READY once it is about to:

  py    a time.sleep loop (Python code; Ctrl-C raises KeyboardInterrupt there)
  c     one long C call that releases the GIL (libc sleep through ctypes)
  gil   one long C call that holds the GIL (sum over a huge range)
  own   its own SIGTERM handler, which prints HANDLED; the program then exits with code 7

The worker is a non-daemon thread (it would keep a normal exit waiting forever), except with
argv[2] == "daemon".
"""

import ctypes
import signal
import sys
import threading
import time


def worker_burn():
    while True:
        sum(i * i for i in range(1000))


def main():
    how = sys.argv[1]
    daemon = len(sys.argv) > 2 and sys.argv[2] == "daemon"
    threading.Thread(target=worker_burn, name="worker", daemon=daemon).start()
    handled = []
    if how == "own":
        signal.signal(signal.SIGTERM, lambda signum, frame: handled.append(signum))
    print("READY", flush=True)
    if how == "c":
        ctypes.CDLL(None).sleep(30)
    elif how == "gil":
        sum(range(6 * 10**9))
    else:
        for _ in range(600):
            time.sleep(0.05)
            if handled:
                print("HANDLED", flush=True)
                time.sleep(0.3)
                sys.exit(7)
    sys.exit(3)


if __name__ == "__main__":
    main()
