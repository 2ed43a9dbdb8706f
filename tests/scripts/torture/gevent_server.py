"""Torture: a monkey-patched gevent echo server and 200 client greenlets (tests/test_torture.py).

    gevent_server.py SECONDS

A `gevent.server.StreamServer` on 127.0.0.1 (port 0) answers with `handle_echo`; CLIENTS
client greenlets (`client_session`) each send requests (`build_request`) and read the echo
back (`check_reply`) until the deadline. Everything runs in the main OS thread, on greenlets
switched by gevent's hub at every blocking socket call. Prints `GEVENT requests=N` on stdout.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import socket  # noqa: E402  (patched by gevent)
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from gevent.server import StreamServer  # noqa: E402

CLIENTS = 200
PAYLOAD = 64


def transform(data: bytes) -> bytes:
    # a little Python work per request on the server side
    return bytes(b ^ 0x20 for b in data)


def handle_echo(sock: socket.socket, _address: tuple[str, int]) -> None:
    with sock:
        while True:
            data = sock.recv(4096)
            if not data:
                return
            sock.sendall(transform(data))


def build_request(i: int, k: int) -> bytes:
    return bytes((i * 31 + k + j) % 26 + 65 for j in range(PAYLOAD))


def check_reply(request: bytes, reply: bytes) -> bool:
    return all((a ^ 0x20) == b for a, b in zip(request, reply))


def client_session(i: int, port: int, deadline: float, counts: list[int]) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        k = 0
        while time.monotonic() < deadline:
            request = build_request(i, k)
            sock.sendall(request)
            reply = b""
            while len(reply) < len(request):
                chunk = sock.recv(len(request) - len(reply))
                if not chunk:
                    raise RuntimeError("server closed the connection")
                reply += chunk
            if not check_reply(request, reply):
                raise RuntimeError(f"bad echo for client {i}")
            k += 1
    counts[i] = k


def main(seconds: float) -> None:
    server = StreamServer(("127.0.0.1", 0), handle_echo)
    server.start()
    deadline = time.monotonic() + seconds
    counts = [0] * CLIENTS
    clients = [
        gevent.spawn(client_session, i, server.server_port, deadline, counts)
        for i in range(CLIENTS)
    ]
    gevent.joinall(clients, timeout=seconds + 30, raise_error=True)
    server.stop(timeout=5)
    if not all(g.dead for g in clients):
        raise RuntimeError("client greenlets still running after the deadline")
    print(f"GEVENT requests={sum(counts)}", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]))
