"""The pprof endpoint's address (--http HOST:PORT, start(http=...)), checked with the rest of a
session's arguments (_config.SessionConfig.validate) before anything is bound or armed.

Loopback only (127.0.0.0/8, ::1, localhost) unless remote access is asked for explicitly:
the endpoint hands out the program's function names, files and command line to whoever asks.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class HttpAddress:
    """Where the endpoint listens: an IP literal (localhost becomes 127.0.0.1) and a port,
    0 for any free one."""

    host: str
    port: int


def parse_http_address(text: object, allow_remote: object, name: str = "http") -> HttpAddress:
    """`text` ("127.0.0.1:6060", "[::1]:0", "localhost:6060") as an HttpAddress; ValueError
    naming `name` for anything else, and for a non-loopback host unless `allow_remote`."""
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a HOST:PORT string, got {text!r}")
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{name}: write an IPv6 address in brackets, [::1]:6060, got {text!r}")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(
            f"{name} must be HOST:PORT with a port from 0 (any free port) to 65535, got {text!r}"
        )
    port = int(port_text)
    if host == "localhost":
        return HttpAddress("127.0.0.1", port)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"{name}: the host must be an IP address or localhost, got {host!r}"
        ) from None
    if not ip.is_loopback and not allow_remote:
        flag = "--http-allow-remote" if name.startswith("--") else "http_allow_remote=True"
        raise ValueError(
            f"{name}: {host} is not a loopback address; the endpoint serves the program's "
            f"profile to anyone who can reach it, so it listens on 127.0.0.1, ::1 or localhost "
            f"unless {flag} is given"
        )
    return HttpAddress(str(ip), port)
