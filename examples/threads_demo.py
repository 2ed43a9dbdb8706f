"""spprof's bundled example: a small multi-threaded program with an uneven CPU split.

`make demo` profiles it. Expected: `crunch_numbers` (main thread) is the hottest function,
`parse_records` runs in two "parser" threads, `checksum` spends its time in hashlib (GIL
released), and the "sleeper" thread sleeps, so it shows almost no CPU time.
"""

import hashlib
import threading
import time


def crunch_numbers(n: int) -> int:
    total = 0
    for i in range(n):
        total += (i * i) % 97
    return total


def parse_records(count: int) -> int:
    fields = 0
    for i in range(count):
        line = f"{i},name{i},{i * 3.5},ok"
        fields += len(line.split(","))
    return fields


def checksum(blocks: int) -> str:
    data = b"x" * (4 << 20)
    h = hashlib.sha256()
    for _ in range(blocks):
        h.update(data)
    return h.hexdigest()


def parser_thread() -> None:
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        parse_records(5_000)


def sleeper_thread() -> None:
    time.sleep(1.5)


def main() -> None:
    threads = [threading.Thread(target=parser_thread, name=f"parser-{i}") for i in range(2)]
    threads.append(threading.Thread(target=sleeper_thread, name="sleeper"))
    threads.append(threading.Thread(target=checksum, args=(40,), name="checksum"))
    for t in threads:
        t.start()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        crunch_numbers(50_000)
    for t in threads:
        t.join()
    print("demo finished")


if __name__ == "__main__":
    main()
