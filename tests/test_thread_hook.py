"""How spprof registers new threading.Threads (issue 24, "The threading profile hook is visible"):
nothing the program can see (threading.getprofile()/gettrace(), sys.getprofile() in the thread)
or undo (threading.setprofile(None), as yappi's start/stop do). Each case runs in its own
interpreter: the program's hooks are process-wide state.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import run_python

# Prints, as JSON, the hooks a program sees before start(), while profiling (main thread and a
# new thread, before its own code), and after stop(); and Thread._bootstrap_inner's identity.
HOOKS_SEEN = textwrap.dedent(
    """
    import json, sys, threading, spprof

    def hooks():
        get_p = getattr(threading, "getprofile", lambda: threading._profile_hook)
        get_t = getattr(threading, "gettrace", lambda: threading._trace_hook)
        return [repr(get_p()), repr(get_t()), repr(sys.getprofile()), repr(sys.gettrace())]

    seen = {"before": hooks()}
    original = threading.Thread.__dict__["_bootstrap_inner"]
    spprof.start(interval_ms=5)
    seen["during"] = hooks()
    t = threading.Thread(target=lambda: seen.__setitem__("thread", hooks()))
    t.start()
    t.join()
    spprof.stop()
    seen["after"] = hooks()
    seen["restored"] = threading.Thread.__dict__["_bootstrap_inner"] is original
    print(json.dumps(seen))
    """
)


def test_threading_and_sys_hooks_are_the_programs_under_spprof():
    # On main, threading.getprofile() was spprof's hook while profiling (CPython's
    # test_threading.test_getprofile_all_threads failed under spprof).
    r = run_python("-c", HOOKS_SEEN)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    nothing = ["None"] * 4
    assert seen["before"] == nothing
    assert seen["during"] == nothing
    assert seen["thread"] == nothing
    assert seen["after"] == nothing
    assert seen["restored"] is True


# Three threads of 0.30 s CPU each, started after the program reset threading's profile hook;
# prints each burner's profiled seconds and its measured thread CPU time.
RESET_THEN_THREADS = textwrap.dedent(
    """
    import json, sys, threading, time, spprof

    measured = {}

    def burn_030(name):
        t0 = time.thread_time()
        end = t0 + 0.30
        while time.thread_time() < end:
            sum(i * i for i in range(100))
        measured[name] = time.thread_time() - t0

    with spprof.Profiler(interval_ms=5, mode=sys.argv[1]) as p:
        threading.setprofile(None)  # what yappi's start/stop and tools like it do
        threads = [threading.Thread(target=burn_030, args=(f"burner-{i}",), name=f"burner-{i}")
                   for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    profiled = {}
    for s in p.profile.samples:
        if s.on_cpu and any(f.function_name == "burn_030" for f in s.frames):
            profiled[s.thread_name] = profiled.get(s.thread_name, 0) + s.weight_ns / 1e9
    print(json.dumps({"profiled": profiled, "measured": measured}))
    """
)


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_threads_started_after_the_program_resets_the_profile_hook_have_all_their_cpu(mode):
    # On main, setprofile(None) dropped spprof's hook: the threads were found only by the
    # drain's scan, up to a pass late, and showed 0.20-0.22 s each of their 0.30 s.
    r = run_python("-c", RESET_THEN_THREADS, mode)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert sorted(out["profiled"]) == ["burner-0", "burner-1", "burner-2"], out
    for name, seconds in out["profiled"].items():
        assert abs(seconds - out["measured"][name]) <= 0.10 * out["measured"][name], (name, out)


def test_thread_registered_before_threading_names_it_keeps_its_name():
    # The hook now runs before threading puts the thread in _active: a thread that ends before
    # any drain pass must still carry its own name (not the OS thread's, "python").
    prog = textwrap.dedent(
        """
        import json, threading, time, spprof
        def short_named():
            end = time.thread_time() + 0.05
            while time.thread_time() < end:
                pass
        with spprof.Profiler(interval_ms=1) as p:
            t = threading.Thread(target=short_named, name="short-and-named")
            t.start()
            t.join()
        print(json.dumps(sorted({s.thread_name for s in p.profile.samples
                                 if any(f.function_name == "short_named" for f in s.frames)})))
        """
    )
    r = run_python("-c", prog)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["short-and-named"]


def test_program_that_wraps_bootstrap_inner_after_start_keeps_its_wrapper_after_stop():
    # stop() puts threading's own method back only while ours is still there.
    prog = textwrap.dedent(
        """
        import threading, spprof
        spprof.start()
        ours = threading.Thread._bootstrap_inner
        def theirs(self):
            return ours(self)
        threading.Thread._bootstrap_inner = theirs
        spprof.stop()
        assert threading.Thread.__dict__["_bootstrap_inner"] is theirs
        t = threading.Thread(target=print, args=("ran",))
        t.start()
        t.join()
        """
    )
    r = run_python("-c", prog)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ran\n"
