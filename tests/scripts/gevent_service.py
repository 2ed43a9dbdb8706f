"""A gevent service and its clients in one process (tests/test_greenlet_census.py): argv = OUT.

Monkey-patched sockets over 127.0.0.1: a StreamServer whose handler (`handle`) reads a request
line, runs `slow_query` (a 50 ms gevent.sleep, a database's stand-in) and answers; CLIENTS
client greenlets (`client`) send REQUESTS requests each and wait for the answers. OUT gets
JSON: the time slow_query's sleeps took in all, and the time the clients waited for answers.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from gevent.server import StreamServer  # noqa: E402

CLIENTS = 10
REQUESTS = 10
measured = {"slow_query": 0.0, "client": 0.0}


def slow_query():
    t = time.monotonic()
    gevent.sleep(0.05)  # line: slow_query waits
    measured["slow_query"] += time.monotonic() - t


def handle(sock, address):
    reader = sock.makefile("rb")
    while reader.readline():
        slow_query()
        sock.sendall(b"ok\n")
    sock.close()


def client(port):
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(REQUESTS):
            sock.sendall(b"q\n")
            t = time.monotonic()
            answer = sock.recv(16)  # line: client waits
            measured["client"] += time.monotonic() - t
            assert answer == b"ok\n", answer


def main():
    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    gevent.joinall([gevent.spawn(client, server.server_port) for _ in range(CLIENTS)])
    server.stop()
    with open(sys.argv[1], "w") as f:
        json.dump(measured, f)


if __name__ == "__main__":
    main()
