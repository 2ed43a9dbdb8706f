"""A trivial ASGI app served by uvicorn on 127.0.0.1:argv[1]; each request costs ~20 ms of
CPU in `busy_work`. uvicorn installs its SIGTERM handler with signal.signal, and on shutdown
puts back what it saved and re-raises the signal (tests/test_exit_paths.py). With
`--api OUT` the server profiles itself: spprof.start(output_path=OUT)."""

import sys
import time

import uvicorn


def busy_work(seconds=0.02):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def app(scope, receive, send):
    assert scope["type"] == "http"
    busy_work()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


if __name__ == "__main__":
    if "--api" in sys.argv:
        import spprof

        spprof.start(output_path=sys.argv[sys.argv.index("--api") + 1], interval_ms=5)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="off")
