"""Run under `spprof --subprocesses --http 127.0.0.1:0`: tests/test_http.py.

A pre-fork server's shape: the master writes the endpoint's port to DIR/port, forks two
workers after the session started and waits for them. Worker K writes DIR/worker-K (its pid)
and burns CPU in burn_K until DIR/stop exists, or until DIR/quit-K exists (then it ends at
once, in the middle of whatever window it is in).
"""

import os
import sys

import spprof

DIR = sys.argv[1]


def spin(flags: tuple[str, ...]) -> int:
    x = 0
    while True:
        for path in flags:
            if os.path.exists(path):
                return x
        for i in range(20000):
            x += i * i


def burn_1() -> int:
    return spin((os.path.join(DIR, "stop"), os.path.join(DIR, "quit-1")))


def burn_2() -> int:
    return spin((os.path.join(DIR, "stop"), os.path.join(DIR, "quit-2")))


def write(name: str, text: str) -> None:
    with open(os.path.join(DIR, name + ".tmp"), "w") as f:
        f.write(text)
    os.rename(os.path.join(DIR, name + ".tmp"), os.path.join(DIR, name))


address = spprof.http_address()
assert address is not None, "no endpoint"
workers = []
for k, burn in ((1, burn_1), (2, burn_2)):
    pid = os.fork()
    if pid == 0:
        write(f"worker-{k}", str(os.getpid()))
        burn()
        os._exit(0)
    workers.append(pid)
write("port", str(address[1]))
for pid in workers:
    os.waitpid(pid, 0)
