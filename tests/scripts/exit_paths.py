"""A program for tests/test_exit_paths.py: some work in `busy_work`, then it ends the way
argv[1] says, without returning through Python:

  exit N       os._exit(N)
  execv-sh     os.execv("/bin/sh", ...): the shell exits with 5
  execv-py     os.execv(sys.executable, ...): that Python prints EXECED and exits with 6
  exec-fails   execv of a missing file (ENOENT) and of an executable that is not a program
               (ENOEXEC), then more work in `after_failed_exec`, then execv /bin/sh (exit 4)
  fork-exit    a forked child works in `child_work` and calls os._exit(9); the parent waits,
               works in `parent_after_fork`, then os._exit(0)
  round-trip   uvicorn's shutdown: save SIGTERM's handler with signal.signal, get a SIGTERM,
               restore the saved handler, re-raise it (prints what getsignal answers)
  hold         prints READY, then calls HOLD_LIB's hold_gil(30) through ctypes.PyDLL: a C call
               that keeps the GIL for 30 s (the test sends SIGTERM meanwhile)

With `--api OUT` after the mode the program profiles itself: spprof.start(output_path=OUT).
With EXIT_PATHS_WAITER=1 in the environment a thread named "waiter" blocks on an Event from
the start (wall mode's folded rows).
"""

import ctypes
import os
import signal
import sys
import tempfile
import time


def busy_work(seconds=0.3):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def after_failed_exec():
    return busy_work()


def child_work():
    return busy_work(0.2)


def parent_after_fork():
    return busy_work(0.2)


def main():
    mode = sys.argv[1]
    if os.environ.get("EXIT_PATHS_WAITER"):
        import threading

        threading.Thread(target=threading.Event().wait, name="waiter", daemon=True).start()
    if "--api" in sys.argv:
        import spprof

        spprof.start(output_path=sys.argv[sys.argv.index("--api") + 1], interval_ms=5)
    busy_work()
    if mode == "exit":
        os._exit(int(sys.argv[2]))
    elif mode == "execv-sh":
        os.execv("/bin/sh", ["sh", "-c", "exit 5"])
    elif mode == "execv-py":
        os.execv(sys.executable, [sys.executable, "-c", "print('EXECED'); raise SystemExit(6)"])
    elif mode == "exec-fails":
        try:
            os.execv("/nonexistent/program", ["program"])
        except FileNotFoundError:
            print("ENOENT", flush=True)
        with tempfile.NamedTemporaryFile("wb", suffix=".bin", delete=False) as f:
            f.write(b"\x00\x01 not a program")
        os.chmod(f.name, 0o755)
        try:
            os.execv(f.name, [f.name])
        except OSError as exc:
            print("FAILED", exc.errno, flush=True)
        finally:
            os.unlink(f.name)
        after_failed_exec()
        os.execvp("sh", ["sh", "-c", "exit 4"])  # execvp: execv along PATH
    elif mode == "fork-exit":
        pid = os.fork()
        if pid == 0:
            child_work()
            os._exit(9)
        _, status = os.waitpid(pid, 0)
        print("CHILD", os.waitstatus_to_exitcode(status), flush=True)
        parent_after_fork()
        os._exit(0)
    elif mode == "round-trip":
        got = []

        def handler(signum, frame):
            got.append(signum)

        saved = signal.signal(signal.SIGTERM, handler)
        print("SAVED", repr(saved), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100):
            if got:
                break
            time.sleep(0.01)
        print("HANDLED", got, flush=True)
        previous = signal.signal(signal.SIGTERM, saved)
        print("RESTORED", "our handler" if previous is handler else repr(previous), flush=True)
        print("NOW", repr(signal.getsignal(signal.SIGTERM)), flush=True)
        signal.raise_signal(signal.SIGTERM)
        time.sleep(5)
        print("STILL ALIVE", flush=True)
    elif mode == "hold":
        time.sleep(0.3)  # a drain pass: the work above is resolved
        lib = ctypes.PyDLL(os.environ["HOLD_LIB"])
        lib.hold_gil.argtypes = [ctypes.c_double]
        print("READY", flush=True)
        lib.hold_gil(30.0)
        print("RETURNED", flush=True)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
