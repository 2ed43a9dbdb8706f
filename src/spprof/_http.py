"""The pprof endpoint (--http): Go net/http/pprof's URLs, served from a running session.

    GET /debug/pprof/                  a small index naming the profile endpoint
    GET /debug/pprof/profile?seconds=N a window of the next N seconds (default 30, 1-3600) on
                                       the session, every thread, as a gzipped pprof protobuf

which `go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=5`, Pyroscope / Grafana
Alloy scrape jobs and Parca read. Anything else is 404; a bad `seconds` is 400 with a one-line
reason; a profile asked for while one is being taken is 429 at once, never a wait.

The listening socket is bound before sampling starts (a port in use fails with nothing
started), moved like the extension's held descriptors (held_fd.h) to a number at or above the
floor programs leave alone, close-on-exec, and closed at the session's stop only while it is
still ours. One thread ("spprof-http") blocks in accept(): no cost while idle. Each accepted
connection is served on a short thread of its own, so a 30 s profile does not keep the index
or a 429 waiting; at most MAX_CONNECTIONS at once, the rest get 503 from the accept thread
(once the threads that have already answered, if any, have ended: FULL_WAIT_S at most).
They are spprof's own threads (_own_threads): never sampled, their CPU time named in the CPU
balance as spprof's. Should one be sampled all the same (a scan that found its state before the
start hook ran), its frames are in this file, which _session lists as the profiler's: those
samples are dropped from every profile and counted in samples_in_profiler.

Across os.fork the accept thread is stopped and started again in the parent with spprof's
native threads (a forked child must not inherit a thread, and CPython 3.12+ warns on fork
from a multi-threaded process); the child closes its copy of the socket and of the
connections being served, so the port is free once the parent ends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional
from urllib.parse import parse_qs, urlsplit

from . import _debug, _stderr
from ._high_fd import identity, move_high, still_ours
from ._http_address import HttpAddress
from ._own_threads import own_thread
from ._rows import SERIAL_MASK, THREAD_AND_FLAGS_WORD

if TYPE_CHECKING:
    from ._model import ProfileData

DEFAULT_SECONDS = 30
MAX_SECONDS = 3600
THREAD_NAME = "spprof-http"  # the accept thread's name, the prefix of the request threads'
MAX_CONNECTIONS = 4  # served at once; more get 503 from the accept thread
REQUEST_TIMEOUT_S = 10.0  # a client that sends nothing (or reads nothing) for this long is dropped
JOIN_TIMEOUT_S = 5.0  # stop() waits at most this long for the requests to hand over theirs
FULL_WAIT_S = 1.0  # at the limit, how long a new connection waits for answered ones to end

# (seconds, stop event) -> the gzipped pprof of the session's next `seconds` seconds, ended
# early when the event is set; None when the session ended before the window did.
WindowFn = Callable[[float, threading.Event], Optional[bytes]]

INDEX = """<html><head><title>/debug/pprof/</title></head><body>
<p>spprof: a profile of this Python process, Go net/http/pprof style</p>
<ul><li><a href="profile?seconds=30">profile</a>: a window of the next N seconds on the running
session (<code>?seconds=N</code>, 1-3600, default 30), gzipped pprof protobuf:
<code>go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=5</code></li></ul>
</body></html>
"""


def bind(address: HttpAddress) -> Server:
    """A listening socket on `address`, moved out of the program's descriptor numbers; OSError
    (naming the address) when it cannot be bound."""
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address.host, address.port))
        sock.listen(16)
    except OSError as exc:
        sock.close()
        raise OSError(
            exc.errno, f"--http: cannot listen on {address.host}:{address.port}: {exc.strerror}"
        ) from None
    sock = move_high(sock, "http")
    return Server(sock, identity(sock))


@dataclass
class Server:
    sock: socket.socket
    identity: tuple[int, int]  # (st_dev, st_ino) of the socket, proven before its close
    window: Optional[WindowFn] = None
    stopping: threading.Event = field(default_factory=threading.Event)  # the accept thread's
    ending: threading.Event = field(default_factory=threading.Event)  # the session's stop
    busy: threading.Lock = field(default_factory=threading.Lock)  # one profile at a time
    accept_thread: Optional[threading.Thread] = None
    handlers: set[threading.Thread] = field(default_factory=set)  # started, not joined yet
    done: set[threading.Thread] = field(default_factory=set)  # of those, the ones ending now
    # Of those, the ones whose answer is made and being sent: the client may have it already
    # (and fork) while the thread has yet to close the connection and end.
    replying: set[threading.Thread] = field(default_factory=set)
    conns: set[socket.socket] = field(default_factory=set)  # being served (a fork's child closes)
    # The local addresses of our own wake-up connections not accepted yet: the accept thread
    # may see `stopping` before it is back in accept(), and the connection then waits in the
    # backlog for the next accept thread (after a fork), which must not serve it as a request.
    wakers: set[tuple[str, int]] = field(default_factory=set)
    handlers_lock: threading.Lock = field(default_factory=threading.Lock)
    stats: dict[str, int] = field(
        default_factory=lambda: {
            "http_requests": 0,
            "http_profiles": 0,
            "http_refused_busy": 0,
            "http_refused_connections": 0,
            "http_session_ended": 0,
            "http_errors": 0,
            "http_fd_lost": 0,
        }
    )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def serve(self, window: WindowFn) -> None:
        self.window = window
        self._start_accepting()

    def _start_accepting(self) -> None:
        self.stopping.clear()
        t = own_thread(self._accept_loop, THREAD_NAME)
        t.start()
        self.accept_thread = t

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError as exc:
                if self.stopping.is_set():
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue
                self.stats["http_errors"] += 1
                _stderr.say(f"spprof: the pprof endpoint stopped serving: accept failed: {exc}")
                return
            if self._is_waker(peer):
                conn.close()
                continue  # ours: `stopping` says whether to go on
            if self.stopping.is_set():
                conn.close()
                return
            self._reap()
            if self._full():
                # Threads that have answered end as soon as they get a CPU; under load that can
                # be after the client's next request (CI: the 5th of 5 sequential got 503).
                self._reap(replying=True, timeout=FULL_WAIT_S)
            with self.handlers_lock:
                full = len(self.handlers) >= MAX_CONNECTIONS
                if not full:
                    name = THREAD_NAME + "-request"
                    t = own_thread(self._handle, name, (conn,))
                    self.handlers.add(t)
                    self.conns.add(conn)
            if full:
                self.stats["http_refused_connections"] += 1
                conn.settimeout(1.0)
                # Read first: a close with the request unread resets, and the 503 is lost.
                with contextlib.suppress(OSError):
                    _read_request_line(conn)
                _reply(conn, 503, "text/plain", b"spprof: too many requests at once\n")
                conn.close()
                continue
            try:
                t.start()
            except RuntimeError as exc:  # no thread to be had: this request goes unanswered
                self.stats["http_errors"] += 1
                _debug.debug(f"http: no thread for a request: {exc}")
                with self.handlers_lock:
                    self.handlers.discard(t)
                    self.conns.discard(conn)
                conn.close()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(REQUEST_TIMEOUT_S)
            with conn:
                status, ctype, body = self._respond(_read_request_line(conn))
                with self.handlers_lock:
                    self.replying.add(threading.current_thread())
                _reply(conn, status, ctype, body)
        except OSError as exc:  # the client left or timed out: nothing to tell it
            _debug.debug(f"http: request dropped: {exc}")
        except Exception as exc:  # never a traceback on the program's stderr
            self.stats["http_errors"] += 1
            _debug.debug(f"http: request failed: {exc!r}")
        finally:
            with self.handlers_lock:
                self.done.add(threading.current_thread())
                self.conns.discard(conn)

    def _respond(self, line: Optional[str]) -> tuple[int, str, bytes]:
        """(status, content type, body) for a request line "GET /path?query HTTP/1.1"."""
        self.stats["http_requests"] += 1
        parts = (line or "").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, "text/plain", b"spprof: bad request line\n"
        method, target = parts[0], urlsplit(parts[1])
        path = target.path.rstrip("/")
        if path not in ("/debug/pprof", "/debug/pprof/profile"):
            return 404, "text/plain", b"spprof: not found; the profile is /debug/pprof/profile\n"
        if method != "GET":
            return 405, "text/plain", b"spprof: only GET is served\n"
        if path == "/debug/pprof":
            return 200, "text/html; charset=utf-8", INDEX.encode()
        seconds, problem = _seconds(parse_qs(target.query).get("seconds"))
        if problem:
            return 400, "text/plain", f"spprof: {problem}\n".encode()
        if not self.busy.acquire(blocking=False):
            self.stats["http_refused_busy"] += 1
            return 429, "text/plain", b"spprof: a profile is being taken; one at a time\n"
        try:
            assert self.window is not None
            data = self.window(seconds, self.ending)
        finally:
            self.busy.release()
        if data is None:
            self.stats["http_session_ended"] += 1
            return 503, "text/plain", b"spprof: the profiling session ended during the window\n"
        self.stats["http_profiles"] += 1
        return 200, "application/octet-stream", data

    def _full(self) -> bool:
        with self.handlers_lock:
            return len(self.handlers) >= MAX_CONNECTIONS

    def _reap(self, replying: bool = False, timeout: float = JOIN_TIMEOUT_S) -> None:
        """Join the request threads that have ended their request (they end within
        microseconds), so that they do not pile up; with `replying` (before a fork, and at the
        connection limit) also those sending their answer: the client may have read it and
        forked before the thread closed the connection, and a fork must not find it alive
        (CPython 3.12+'s multi-threaded warning; 1 CI run in ~40 before). A request still in
        its window goes on. `timeout` is for them all: a client slow to read waits alone."""
        with self.handlers_lock:
            ending = list(self.done | self.replying) if replying else list(self.done)
        deadline = time.monotonic() + timeout
        for t in ending:
            _join(t, max(0.0, deadline - time.monotonic()))
        with self.handlers_lock:
            gone = [t for t in ending if not t.is_alive()]
            self.done.difference_update(gone)
            self.replying.difference_update(gone)
            self.handlers.difference_update(gone)

    def _stop_accepting(self) -> None:
        """Wake the accept thread (a connection to ourselves: close() or shutdown() on a
        listening socket does not wake accept() everywhere) and join it."""
        self.stopping.set()
        t, self.accept_thread = self.accept_thread, None
        if t is None:
            return
        host, port = self.address
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if host == "0.0.0.0" else "::1"
        try:
            with socket.socket(self.sock.family, socket.SOCK_STREAM) as waker:
                waker.settimeout(1.0)
                waker.bind((host, 0))  # its address known before the accept thread can see it
                me = _addr(waker.getsockname())
                with self.handlers_lock:
                    self.wakers.add(me)
                try:
                    waker.connect((host, port))
                except OSError:
                    with self.handlers_lock:
                        self.wakers.discard(me)
                    raise
        except OSError as exc:
            _debug.debug(f"http: could not wake the accept thread: {exc}")
        _join(t, JOIN_TIMEOUT_S)

    def _is_waker(self, peer: object) -> bool:
        with self.handlers_lock:
            try:
                self.wakers.remove(_addr(peer))
            except KeyError:
                return False
            return True

    def close(self) -> dict[str, int]:
        """At the session's stop: no new requests, a request in a window gets what there is
        (its window ends now), threads joined, the socket closed if still ours. Its stats."""
        self.ending.set()
        self._stop_accepting()
        with self.handlers_lock:
            running = list(self.handlers)
        deadline = time.monotonic() + JOIN_TIMEOUT_S  # for them all: a stuck client waits alone
        for t in running:
            t.join(max(0.0, deadline - time.monotonic()))
        self._close_socket()
        return dict(self.stats)

    def _close_socket(self) -> None:
        if still_ours(self.sock, self.identity):
            self.sock.close()
        else:  # the program closed our number and it names something else now: leave it
            self.stats["http_fd_lost"] += 1
            self.sock.detach()


def _addr(sockaddr: object) -> tuple[str, int]:
    """(host, port) of a socket address of either family."""
    if isinstance(sockaddr, tuple) and len(sockaddr) >= 2:
        return str(sockaddr[0]), int(sockaddr[1])
    return str(sockaddr), 0


def _join(t: threading.Thread, timeout: float) -> None:
    """t.join(), and on Linux until the OS thread is gone too: before 3.13 join() returns when
    the thread's Python state is released, a moment before the thread ends, and a fork in that
    moment still counts it (CPython 3.12's multi-threaded warning; measured: 1 run in 4)."""
    t.join(timeout)
    task = f"/proc/self/task/{t.native_id}" if t.native_id else ""
    if t.is_alive() or not task or not os.path.isdir("/proc/self/task"):
        return
    deadline = time.monotonic() + 0.1
    while os.path.exists(task) and time.monotonic() < deadline:
        time.sleep(0.0002)


def _seconds(values: Optional[list[str]]) -> tuple[int, str]:
    """(seconds, "") from the query's `seconds`, or (0, the reason it is refused)."""
    if not values:
        return DEFAULT_SECONDS, ""
    text = values[-1]
    if not text.isdigit() or not 1 <= int(text) <= MAX_SECONDS:
        return 0, f"seconds must be a whole number from 1 to {MAX_SECONDS}, got {text!r}"
    return int(text), ""


def _read_request_line(conn: socket.socket) -> Optional[str]:
    """The request's first line; the headers are read and ignored (at most 64 KiB in all)."""
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data and len(data) < 65536:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    line = data.split(b"\n", 1)[0].rstrip(b"\r")
    return line.decode("latin-1") if line else None


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


def _reply(conn: socket.socket, status: int, ctype: str, body: bytes) -> None:
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        "X-Content-Type-Options: nosniff\r\n"
    )
    if ctype == "application/octet-stream":
        head += 'Content-Disposition: attachment; filename="profile"\r\n'
    try:
        conn.sendall((head + "\r\n").encode("latin-1") + body)
    except OSError as exc:
        _debug.debug(f"http: reply not sent: {exc}")


def drop_server_samples(profile: ProfileData) -> int:
    """Drop the samples of the endpoint's threads (by their names, spprof's); how many.

    Their frames are in this file, which the profiler's-frames filter drops already, but a
    thread is also sampled in threading's bootstrap before its target's frame is pushed and
    after it returns."""
    ours = {t.serial for t in profile.thread_table if t.name.startswith(THREAD_NAME)}
    if not ours:
        return 0
    words = profile._row_words(THREAD_AND_FLAGS_WORD)
    return profile.drop_rows([i for i, w in enumerate(words) if (w & SERIAL_MASK) in ours])


# ---- the one endpoint of the process -----------------------------------------------------

_server: Optional[Server] = None


def serve(server: Server, window: WindowFn) -> None:
    """Start serving (the session has started); the bound address said once on stderr."""
    global _server
    _server = server
    server.serve(window)
    host, port = server.address
    shown = f"[{host}]" if ":" in host else host
    _stderr.say(
        f"spprof: pprof endpoint on http://{shown}:{port}/debug/pprof/ "
        f"(go tool pprof http://{shown}:{port}/debug/pprof/profile?seconds=30)"
    )


def shutdown() -> dict[str, int]:
    """At the session's stop: the endpoint closed, its stats ({} when there was none)."""
    global _server
    server, _server = _server, None
    return server.close() if server is not None else {}


def address() -> Optional[tuple[str, int]]:
    """(host, port) the endpoint listens on, None when there is none."""
    server = _server
    return server.address if server is not None else None


def _before_fork() -> None:
    """Only the accept thread and the answered requests' threads: a request in its window
    goes on (its thread is the one CPython's fork warning may then count)."""
    if _server is not None:
        _server._stop_accepting()
        _server._reap(replying=True)


def restart_after_fork() -> None:
    """In the parent, once spprof's native threads are back (_session._after_fork_parent:
    on 3.13+ that is after os.fork has returned, which an after_in_parent hook here is not)."""
    if _server is not None and _server.accept_thread is None:
        _server._start_accepting()


def _after_fork_child() -> None:
    """The child runs unprofiled: its copy of the socket is closed (else the port stays bound
    for as long as the child lives), no thread of ours came along."""
    global _server
    server, _server = _server, None
    if server is not None:
        server._close_socket()
        for conn in list(server.conns):  # the parent's threads serve them; no lock (not ours)
            conn.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_child)
