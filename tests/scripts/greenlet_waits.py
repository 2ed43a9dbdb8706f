"""Waiting greenlets (tests/test_greenlet_census.py): argv = CASE MODE OUT.

CASE "gevent": profiling starts before gevent is imported (as `spprof --greenlets` does); for
RUN seconds `sleeper` waits in gevent.sleep, `getter` in a gevent Queue's get, `reader` in a
recv on a 127.0.0.1 socket fed every 100 ms, and `cruncher` burns CPU, yielding with
gevent.sleep(0); each waiting greenlet measures the time its waits took.
CASE "raw": plain greenlets and a scheduler of the script's own, in a threading.Thread started
after profiling began: `napper` asks to be woken after 80 ms, `listener` to be woken when a
socket is readable; each measures its waits.
MODE is spprof's mode, with greenlets=True. OUT gets JSON: the measured waits, the stats, and
the samples as [thread name, weight_ns, [[function, file, line], ...]].
"""

import select
import socket
import sys
import threading
import time

import samples_json

import spprof

RUN = 2.0
waited = {"sleeper": 0.0, "getter": 0.0, "reader": 0.0, "napper": 0.0, "listener": 0.0}


def spin():
    x = 0
    for i in range(20000):
        x += i * i
    return x


def gevent_case():
    import gevent
    import gevent.queue
    import gevent.socket

    def sleeper():
        end = time.monotonic() + RUN
        while time.monotonic() < end:
            t = time.monotonic()
            gevent.sleep(0.08)  # line: sleeper waits
            waited["sleeper"] += time.monotonic() - t

    def getter(queue):
        while True:
            t = time.monotonic()
            item = queue.get()  # line: getter waits
            waited["getter"] += time.monotonic() - t
            if item is None:
                return

    def reader(sock):
        while True:
            t = time.monotonic()
            data = sock.recv(100)  # line: reader waits
            waited["reader"] += time.monotonic() - t
            if not data:
                return

    def cruncher():
        end = time.monotonic() + RUN
        while time.monotonic() < end:
            spin()
            gevent.sleep(0)

    def feeder(sock):
        end = time.monotonic() + RUN
        while time.monotonic() < end:
            gevent.sleep(0.1)
            sock.sendall(b"x")
        sock.close()

    server = gevent.socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = gevent.socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    queue = gevent.queue.Queue()
    jobs = [
        gevent.spawn(f, *a)
        for f, a in ((sleeper, ()), (getter, (queue,)), (reader, (accepted,)), (cruncher, ()))
    ]
    feeding = gevent.spawn(feeder, client)
    gevent.sleep(RUN)
    queue.put(None)
    gevent.joinall([*jobs, feeding])


def raw_case():
    """A scheduler of plain greenlets: each greenlet switches to the scheduler (the thread's
    main greenlet) with what it waits for; the scheduler sleeps in select() until one is due."""
    import greenlet

    left, right = socket.socketpair()
    stop = threading.Event()

    def feeder():
        while not stop.wait(0.1):
            right.sendall(b"x")

    def napper(main):
        end = time.monotonic() + RUN
        while time.monotonic() < end:
            t = time.monotonic()
            main.switch(("sleep", 0.08))  # line: napper waits
            waited["napper"] += time.monotonic() - t

    def listener(main):
        end = time.monotonic() + RUN
        while time.monotonic() < end:
            t = time.monotonic()
            main.switch(("read", left))  # line: listener waits
            waited["listener"] += time.monotonic() - t
            left.recv(100)

    def schedule():
        main = greenlet.getcurrent()
        waiting = {}  # greenlet -> (deadline or None, socket or None)
        for fn in (napper, listener):
            g = greenlet.greenlet(fn)
            waiting[g] = g.switch(main)
        while waiting:
            for g, (kind, arg) in list(waiting.items()):
                if kind == "sleep":
                    waiting[g] = ("until", time.monotonic() + arg)
            now = time.monotonic()
            deadlines = [arg for kind, arg in waiting.values() if kind == "until"]
            socks = [arg for kind, arg in waiting.values() if kind == "read"]
            timeout = max(0.0, min(deadlines) - now) if deadlines else 1.0
            readable, _, _ = select.select(socks, [], [], timeout)
            now = time.monotonic()
            for g, (kind, arg) in list(waiting.items()):
                if (kind == "until" and arg <= now) or (kind == "read" and arg in readable):
                    request = g.switch()
                    if g.dead:
                        del waiting[g]
                    else:
                        waiting[g] = request

    feeding = threading.Thread(target=feeder, name="feeder")
    feeding.start()
    worker = threading.Thread(target=schedule, name="scheduler")
    worker.start()
    worker.join()
    stop.set()
    feeding.join()


def main():
    case, mode, out = sys.argv[1:4]
    with spprof.Profiler(mode=mode, greenlets=True) as p:
        gevent_case() if case == "gevent" else raw_case()
    samples_json.write(out, p, waited=waited)


if __name__ == "__main__":
    main()
