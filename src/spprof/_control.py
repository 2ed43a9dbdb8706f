"""The control channel: `spprof dump PID` and `spprof record --pid PID` for a running session.

Every session (the CLI's, `spprof.start()`'s, a --subprocesses child's) listens on a Unix
socket, RUNTIME_DIR/PID.sock. RUNTIME_DIR ($SPPROF_RUNTIME_DIR, else /tmp/spprof-UID) is a
directory only its user can enter: made 0700, and refused unless it is a real directory of
this uid with no group or other bits. A peer of another uid is refused too (SO_PEERCRED /
LOCAL_PEERCRED). Nothing is reachable from the network. SPPROF_CONTROL=0 turns it off.

No thread of its own: the drain thread polls the socket at each wake-up (every 50 ms, no
GIL) and calls serve() with the GIL when a client waits or a request's time has come
(session/control_wake.h). serve() never blocks: sockets are non-blocking, and a request
not read within READ_TIMEOUT_S is dropped. One request per connection, a JSON line each way:

    {"cmd": "dump"}                     -> after DUMP_SPAN_S: {"ok": true, "threads": [...]},
                                           each sampled thread with its "last_sample" of
                                           the span (native frames, "gil")
    {"cmd": "window", "seconds": S}     -> after S seconds: {"ok": true, "path": P, ...},
     (with "until_end": true, also when the client sends {"cmd": "end"} before)
                                           the window's profile in .spprof form at P (in
                                           RUNTIME_DIR; the client converts and removes it)
    anything else                       -> {"ok": false, "error": "..."}

The socket is ours at a high descriptor number (_high_fd.py); a daemon that closes it (or
reuses the number) is found by its identity before any accept, and the channel ends quietly
(stats: control_fd_lost). A forked child closes its copy; exec closes it (close-on-exec).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import _debug, _ext
from ._family_files import alive
from ._high_fd import identity, move_high, still_ours
from ._runner_frames import is_runner_file

READ_TIMEOUT_S = 5.0  # a client that sends no full request line in this long is dropped
SEND_TIMEOUT_S = 30.0  # one that reads nothing of its answer for this long, too
MAX_REQUEST = 4096
MAX_CLIENTS = 16  # connections being served at once; more are closed at accept
MAX_WINDOW_S = 3600
STALE_WINDOW_S = 2 * 3600  # a window's file its client did not take is removed after this
RETRY_S = 0.05  # the next drain wake-up
# A dump reads every thread's CPU clock, lets the program run this long, then takes the
# stacks: "running" is a thread whose clock moved by ON_CPU_SHARE of that (with the GIL ours
# while the stacks are taken, every Python thread waits for it: the OS state cannot tell).
DUMP_SPAN_S = 0.1
ON_CPU_SHARE = 0.05
# A window with no fixed end (record --pid without --duration) is asked whether the client
# ended it this often: the drain takes the GIL this often anyway (drain_thread.cpp).
END_POLL_S = 0.25


def _peercred(platform: str) -> Optional[tuple[int, int, int]]:
    """(level, option, size) of the peer's credentials on `platform`; None: not known."""
    if platform == "darwin":
        return (0, 0x001, struct.calcsize("IIh16I"))  # SOL_LOCAL, LOCAL_PEERCRED, xucred
    if hasattr(socket, "SO_PEERCRED"):
        return (socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return None


_PEERCRED = _peercred(sys.platform)


_runtime_dir_override: Optional[str] = None  # spprof attach's, for the process's sessions


def use_runtime_dir(path: str) -> None:
    """The directory spprof attach's client looks in (the target's environment may name
    another): this process's sessions listen there from now on."""
    global _runtime_dir_override
    _runtime_dir_override = path


def runtime_dir(create: bool) -> str:
    """The directory of this user's control sockets; PermissionError when it is not private
    (another user made it, or it is a link, or others may enter it)."""
    path = (
        _runtime_dir_override
        or os.environ.get("SPPROF_RUNTIME_DIR")
        or os.path.join("/tmp", f"spprof-{os.getuid()}")
    )
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(
            f"{path} is not a private directory of uid {os.getuid()} "
            f"(mode {stat.filemode(st.st_mode)}, owner uid {st.st_uid})"
        )
    return path


def socket_path(directory: str, pid: int) -> str:
    return os.path.join(directory, f"{pid}.sock")


def peer_uid(conn: socket.socket) -> Optional[int]:
    """The uid of the process at the other end; None where the OS cannot tell."""
    if _PEERCRED is None:
        return None
    level, option, size = _PEERCRED
    try:
        raw = conn.getsockopt(level, option, size)
    except OSError:
        return None
    if sys.platform == "darwin":
        return int(struct.unpack_from("I", raw, 4)[0])  # xucred.cr_uid
    return int(struct.unpack("3i", raw)[1])  # ucred: pid, uid, gid


@dataclass
class _Client:
    conn: socket.socket
    inbuf: bytes = b""
    outbuf: bytes = b""
    window: Any = None  # the session's window (_windows.Window) while one is open
    until_end: bool = False  # the window also ends when the client sends {"cmd": "end"}
    dump_from: Optional[tuple[float, dict[int, int]]] = None  # a dump's first CPU readings
    dump_window: Any = None  # a window over the dump's span: each thread's last sample
    due: float = 0.0  # monotonic: when the window closes, or the dump is taken
    deadline: float = 0.0  # monotonic: when the client is dropped

    def answer(self, reply: dict[str, Any], now: float) -> None:
        self.outbuf = json.dumps(reply).encode() + b"\n"
        self.deadline = now + SEND_TIMEOUT_S


# The session's part: a window opened now, and the window's profile written to a path, or
# handed over (a dump's span: each thread's last sample).
OpenWindow = Callable[[float], Any]  # its length in seconds (at most: it may end earlier)
CloseWindow = Callable[[Any, str], Optional[int]]  # -> samples written, None: session gone
TakeWindow = Callable[[Any], Any]  # -> the window's Profile, None: session gone


@dataclass
class Channel:
    sock: socket.socket
    path: str
    ident: tuple[int, int]
    directory: str
    open_window: OpenWindow
    close_window: CloseWindow
    take_window: Optional[TakeWindow] = None
    clients: list[_Client] = field(default_factory=list)
    lost: bool = False  # the program closed our number (or reused it)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stats: dict[str, int] = field(
        default_factory=lambda: {
            "control_requests": 0,
            "control_refused_peers": 0,
            "control_errors": 0,
            "control_fd_lost": 0,
        }
    )

    # ---- the drain thread's call -------------------------------------------------------

    def serve(self) -> Optional[float]:
        if not self.lock.acquire(blocking=False):  # close() is under way
            return RETRY_S
        try:
            if not still_ours(self.sock, self.ident):
                self.stats["control_fd_lost"] += 1
                self.lost = True
                _ext._control_listen(-1, None)
                self._drop_all()
                return None
            self._accept()
            now = time.monotonic()
            for c in list(self.clients):
                self._step(c, now)
            return self._next_call(time.monotonic())
        except Exception as exc:  # never a traceback on the program's stderr
            self.stats["control_errors"] += 1
            _debug.debug(f"control: {exc!r}")
            return RETRY_S
        finally:
            self.lock.release()

    def _accept(self) -> None:
        for _ in range(MAX_CLIENTS):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                self.stats["control_refused_peers"] += 1
                conn.close()
                continue
            if len(self.clients) >= MAX_CLIENTS:
                conn.close()
                continue
            now = time.monotonic()
            self.clients.append(_Client(conn, deadline=now + READ_TIMEOUT_S))

    def _step(self, c: _Client, now: float) -> None:
        try:
            if c.outbuf:
                sent = c.conn.send(c.outbuf)
                c.outbuf = c.outbuf[sent:]
                if not c.outbuf:
                    self._drop(c)
                    return
            elif c.window is not None or c.dump_from is not None:
                if c.until_end and now < c.due:
                    data = c.conn.recv(MAX_REQUEST)  # BlockingIOError: nothing said yet
                    if not data:  # the client left: so did the window
                        self._drop(c)
                        return
                    if b"end" in data:
                        c.due = now
                if now >= c.due:
                    if c.window is not None:
                        self._finish_window(c, now)
                    else:
                        assert c.dump_from is not None
                        t0, cpu0 = c.dump_from
                        window, c.dump_from, c.dump_window = c.dump_window, None, None
                        profile = None
                        if window is not None and self.take_window is not None:
                            profile = self.take_window(window)
                        c.answer(dump(cpu0, now - t0, profile), now)
                    self._step(c, now)
                    return
            else:
                self._read(c, now)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:  # the client left
            _debug.debug(f"control: client dropped: {exc}")
            self._drop(c)
            return
        if c in self.clients and not _waiting(c) and now >= c.deadline:
            self._drop(c)

    def _read(self, c: _Client, now: float) -> None:
        data = c.conn.recv(MAX_REQUEST)
        if not data:
            self._drop(c)
            return
        c.inbuf += data
        if b"\n" not in c.inbuf:
            if len(c.inbuf) >= MAX_REQUEST:
                c.answer({"ok": False, "error": "request too long"}, now)
            return
        line = c.inbuf.split(b"\n", 1)[0]
        self.stats["control_requests"] += 1
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError:
            c.answer({"ok": False, "error": "a request is one JSON object on one line"}, now)
            return
        cmd = request.get("cmd")
        if cmd == "dump":
            c.dump_from, c.due = (now, _cpu_times()), now + DUMP_SPAN_S
            # The span's samples give each sampled thread's last stack with native frames
            # and whether it held the GIL, which sys._current_frames cannot tell.
            if self.take_window is not None:
                c.dump_window = self.open_window(DUMP_SPAN_S)
        elif cmd == "window":
            seconds = request.get("seconds")
            if not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_WINDOW_S:
                c.answer({"ok": False, "error": f"seconds must be in (0, {MAX_WINDOW_S}]"}, now)
                return
            window = self.open_window(float(seconds))
            if window is None:
                c.answer({"ok": False, "error": "the session has ended"}, now)
                return
            c.window, c.due = window, now + float(seconds)
            c.until_end = bool(request.get("until_end"))
        else:
            c.answer({"ok": False, "error": f"unknown command {cmd!r}"}, now)

    def _finish_window(self, c: _Client, now: float) -> None:
        window, c.window = c.window, None
        try:
            fd, path = tempfile.mkstemp(
                prefix=f"{os.getpid()}-", suffix=".spprof", dir=self.directory
            )
            os.close(fd)
            samples = self.close_window(window, path)
        except OSError as exc:  # the runtime directory is full or gone: the client hears it
            c.answer({"ok": False, "error": f"the window could not be saved: {exc}"}, now)
            return
        if samples is None:
            os.unlink(path)
            c.answer({"ok": False, "error": "the session ended during the window"}, now)
        else:
            c.answer({"ok": True, "path": path, "samples": samples}, now)

    def _next_call(self, now: float) -> Optional[float]:
        times = [c.due for c in self.clients if _waiting(c)]
        if any(c.until_end and c.window is not None for c in self.clients):
            times.append(now + END_POLL_S)
        if not all(_waiting(c) for c in self.clients):
            times.append(now + RETRY_S)  # a request to read or an answer to send: poll again
        return max(0.0, min(times) - now) if times else None

    def _drop(self, c: _Client) -> None:
        if c in self.clients:
            self.clients.remove(c)
        c.conn.close()

    def _drop_all(self) -> None:
        for c in list(self.clients):
            self._drop(c)

    # ---- the session's calls -----------------------------------------------------------

    def close(self) -> dict[str, int]:
        """At the session's stop: no more listening; clients in a window get an error."""
        _ext._control_listen(-1, None)
        with self.lock:
            now = time.monotonic()
            for c in list(self.clients):
                try:
                    if _waiting(c):
                        c.window = c.dump_from = c.dump_window = None
                        c.answer({"ok": False, "error": "the session ended"}, now)
                    if c.outbuf:
                        c.conn.setblocking(True)
                        c.conn.settimeout(0.2)
                        c.conn.sendall(c.outbuf)
                except OSError:
                    pass
            self._drop_all()
            if not self.lost and still_ours(self.sock, self.ident):
                self.sock.close()
            else:
                if not self.lost:
                    self.stats["control_fd_lost"] += 1
                self.sock.detach()
            _unlink(self.path)  # named by our pid: nobody else's
        return dict(self.stats)


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _waiting(c: _Client) -> bool:
    """In a window or a dump's span: its next step is at c.due."""
    return c.window is not None or c.dump_from is not None


def _cpu_times() -> dict[int, int]:
    """{ident: CPU ns} of the threads threading knows (their native ids)."""
    out = {}
    for ident, t in list(threading._active.items()):  # type: ignore[attr-defined]
        native_id = getattr(t, "native_id", None)
        ns = _ext._thread_cpu_ns(native_id, ident) if native_id else None
        if ns is not None:
            out[ident] = ns
    return out


def _last_samples(profile: Any) -> dict[int, Any]:
    """{native thread id: its latest sample} of a dump span's window."""
    last: dict[int, Any] = {}
    for s in profile.samples if profile is not None else ():
        seen = last.get(s.native_thread_id)
        if seen is None or s.timestamp_ns >= seen.timestamp_ns:
            last[s.native_thread_id] = s
    return last


def _last_sample(s: Any, now_ns: int) -> dict[str, Any]:
    """A thread's latest sample of the span, as the dump tells it: its stack leaf first with
    native frames (native mode), whether it held the GIL (None: not known), how long ago."""
    return {
        "age_ms": max(0, round((now_ns - s.timestamp_ns) / 1e6)),
        "gil": s.gil,
        "on_cpu": s.on_cpu and not s.idle,
        "frames": [
            {
                "function": f.display_name,
                "file": f.filename,
                "line": f.lineno,
                "native": f.is_native,
            }
            for f in reversed(s.frames)
        ],
    }


def dump(cpu0: dict[int, int], span_s: float, profile: Any = None) -> dict[str, Any]:
    """Every thread's Python stack now (the drain thread holds the GIL: each other thread
    is stopped between two bytecodes or in a call that let the GIL go), and whether it ran
    in the span before (cpu0: its CPU clock then). `profile`: the span's window, whose
    latest sample of each thread is added (native frames, the GIL)."""
    last = _last_samples(profile)
    now_ns = _ext.monotonic_ns()
    me = threading.get_ident()
    known = dict(threading._active)  # type: ignore[attr-defined]  # no dummy made for us
    cpu1 = _cpu_times()
    threads = []
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        t = known.get(ident)
        state, cpu_pct = "unknown", None
        if ident in cpu0 and ident in cpu1 and span_s > 0:
            share = (cpu1[ident] - cpu0[ident]) / 1e9 / span_s
            state, cpu_pct = ("running" if share >= ON_CPU_SHARE else "idle"), round(100 * share)
        frames: list[dict[str, Any]] = []
        f: Any = frame
        while f is not None and len(frames) < 1024:
            code = f.f_code
            frames.append(
                {
                    "function": getattr(code, "co_qualname", code.co_name),
                    "file": code.co_filename,
                    "line": f.f_lineno,
                }
            )
            f = f.f_back
        while frames and is_runner_file(frames[-1]["file"]):  # the CLI's runner, at the root
            frames.pop()
        threads.append(
            {
                "ident": ident,
                "native_id": getattr(t, "native_id", None) if t is not None else None,
                "name": t.name if t is not None else None,
                "daemon": t.daemon if t is not None else None,
                "main": t is threading.main_thread(),
                "state": state,
                "cpu_pct": cpu_pct,
                "frames": frames,
            }
        )
        native_id = getattr(t, "native_id", None) if t is not None else None
        if isinstance(native_id, int) and native_id in last:
            threads[-1]["last_sample"] = _last_sample(last[native_id], now_ns)
    threads.sort(key=lambda t: (not t["main"], t["native_id"] or 0))
    return {"ok": True, "pid": os.getpid(), "argv": list(sys.argv), "threads": threads}


# ---- the session's one channel -------------------------------------------------------------

_channel: Optional[Channel] = None
_tidied: set[str] = set()  # runtime directories this process has removed stale files from


def enabled() -> bool:
    return os.environ.get("SPPROF_CONTROL", "1") != "0"


def open_channel(
    open_window: OpenWindow,
    close_window: CloseWindow,
    tidy: bool,
    take_window: Optional[TakeWindow] = None,
) -> None:
    """Listen for this session (never raises: a process that cannot have a channel is
    profiled all the same, and says why in the debug log). `tidy`: also remove the files of
    processes that are gone (not in each of a --subprocesses family's many children)."""
    global _channel
    if _channel is not None or not enabled():
        return
    try:
        directory = runtime_dir(create=True)
        if tidy and directory not in _tidied:  # once per process: sessions may be many
            _tidied.add(directory)
            _remove_stale(directory)
        path = socket_path(directory, os.getpid())
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # this pid's: a process before an exec, or a dead one's
            sock.bind(path)
            sock.listen(MAX_CLIENTS)
            sock = move_high(sock, "control")
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
    except OSError as exc:
        _debug.debug(f"control: no control socket: {exc}")
        return
    _channel = Channel(
        sock, path, identity(sock), directory, open_window, close_window, take_window
    )
    _ext._control_listen(sock.fileno(), _channel.serve)
    _debug.debug(f"control: listening on {path}")


def close_channel() -> dict[str, int]:
    global _channel
    channel, _channel = _channel, None
    return channel.close() if channel is not None else {}


def after_fork_child() -> None:
    """The child's copy of the socket is closed (the file stays: it is the parent's)."""
    global _channel
    channel, _channel = _channel, None
    if channel is None:
        return
    for c in channel.clients:
        c.conn.close()
    if still_ours(channel.sock, channel.ident):
        channel.sock.close()
    else:
        channel.sock.detach()


def _remove_stale(directory: str) -> None:
    """Socket files of processes that are gone (killed before their stop)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        pid, _, suffix = name.partition(".")
        if suffix in ("spprof", "py") and "-" in pid:  # a window or attach file left behind
            if time.time() - _mtime(os.path.join(directory, name)) < STALE_WINDOW_S:
                continue
        elif suffix != "sock" or not pid.isdigit() or alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, name))


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return time.time()

    return True
