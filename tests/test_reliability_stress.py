"""Stress, each bounded for CI (SPPROF_STRESS=1 for the long form), each checking that the
profile is still right afterwards, not only that nothing crashed. Every workload runs in a
subprocess (tests/scripts/rel_stress.py) with a timeout: a crash or a hang fails one test."""

from __future__ import annotations

import pytest

from test_reliability_common import figure, run_workload, scale

pytestmark = pytest.mark.stress


def test_hundreds_of_threads_started_and_ended_while_sampling_at_1ms():
    n = scale(200, 2000)
    _, r = run_workload("rel_stress.py", "threads", n, timeout=scale(120, 900))
    figure(
        "threads_churn",
        threads=r["threads"],
        threads_sampled=r["threads_sampled"],
        samples=r["samples"],
        weight_over_cpu=round(r["worker_weight_s"] / r["worker_cpu_s"], 3),
        empty_samples=r["empty_samples"],
    )
    assert r["threads_done"] == n
    assert r["threads_seen"] >= n  # every thread registered
    assert r["threads_ended"] >= n
    # each worker burns 10 ms of CPU: at 1 ms nearly all of them are sampled ...
    assert r["threads_sampled"] >= 0.8 * n, r
    # ... under their own identity, for about the time they used: a CPU-clock timer fires on
    # the scheduler tick, so the CPU a thread spends after its last tick is never sampled
    # (about 3 ms of each 10 ms thread here; docs/reliability.md, known limits)
    assert r["wrong_identity"] == 0
    assert 0.6 * r["worker_cpu_s"] <= r["worker_weight_s"] <= 1.1 * r["worker_cpu_s"], r
    assert r["spin_inner_samples"] > 0.5 * r["samples"]
    # nothing left behind: timers, threads
    assert r["timers_active_after"] == 0 and r["timers_left"] == ""
    assert r["tasks_after"] == r["tasks_before"]
    assert r["dropped"] == 0


def test_start_stop_cycles_race_with_thread_churn_under_1ms_sampling():
    cycles = scale(200, 3000)
    _, r = run_workload("rel_stress.py", "race", cycles, timeout=scale(120, 900))
    figure(
        "start_stop_race",
        cycles=r["cycles"],
        seconds=round(r["seconds"], 2),
        threads_churned=r["threads_churned"],
        final_samples=r["final_samples"],
    )
    assert r["errors"] == []
    assert r["threads_churned"] > 0
    after = r["after_cycles"]
    assert after["timers_left"] == ""
    assert after["tasks"] == r["tasks_before"]  # no thread of ours left behind
    assert after["handler"] == "<Handlers.SIG_DFL: 0>"
    # the final session still measures the right thing: not doubled, not gone (fewer samples
    # with heavier weights on an oversubscribed machine: one per time slice, docs/reliability.md)
    assert 1 <= r["final_samples"] <= 1.25 * r["final_expected"], r
    assert abs(r["final_weight_s"] - r["final_cpu_s"]) <= 0.15 * r["final_cpu_s"], r
    assert r["final_spin_share"] > 0.95


def test_fork_and_subprocess_in_a_loop_while_profiling():
    n = scale(25, 400)
    _, r = run_workload("rel_stress.py", "fork", n, timeout=scale(120, 900))
    figure(
        "fork_loop",
        forks=r["forks"],
        subprocesses=r["subprocesses"],
        parent_samples=r["parent_samples"],
        children_profiling_themselves=len(r["children_own_samples"]),
    )
    assert r["forks"] == n and r["fork_status"] == [0]
    assert r["children_reported"] == n
    assert r["children_active"] == 0  # a forked child is not profiled ...
    # ... but can profile itself
    assert len(r["children_own_samples"]) == len(range(0, n, 5))
    # each profiled its 0.2 s of CPU: ~50 samples at the 4 ms tick; on an oversubscribed
    # machine the kernel checks a CPU timer about once per time slice (docs/reliability.md),
    # so a few heavy samples, whose weights still cover most of the CPU time
    assert all(k >= 1 for k in r["children_own_samples"]), r
    assert all(0.3 <= s <= 1.2 for s in r["children_own_shares"]), r
    assert r["subprocess_rcs"] == [0], r["subprocess_errs"]
    assert all(k >= 1 for k in r["subprocess_samples"]), r
    assert all(0.3 <= s <= 1.2 for s in r["subprocess_shares"]), r
    # the parent's profile holds its own threads only, and its work
    assert set(r["pids"]) <= {r["bg_native"]}
    assert abs(r["parent_weight_s"] - r["parent_cpu_s"]) <= 0.2 * r["parent_cpu_s"], r


def test_thousands_of_exec_functions_in_several_threads_never_get_a_wrong_name():
    n = scale(1500, 15000)
    _, r = run_workload("rel_stress.py", "exec", n, 3, timeout=scale(120, 900))
    figure(
        "exec_functions",
        functions=r["functions"],
        samples=r["samples"],
        exec_frames=r["exec_frames"],
        unknown=r["unknown_frames"],
        unknown_share=round(
            r["unknown_frames"] / max(1, r["unknown_frames"] + r["exec_frames"]), 2
        ),
        code_objects=r["code_objects"],
        memory_bytes=r["memory_bytes"],
    )
    assert r["wrong"] == []
    assert r["exec_frames"] > 0 and r["make_and_run_present"]
    assert r["def_line_frames"] <= max(2, 0.2 * r["exec_frames"]), r
    assert r["unknown_frames"] == r["stats_unknown"]
    # A code object that dies is kept until the drain has resolved its samples: the dying
    # functions keep their names (a torn read may still make a rare <unknown>, never a wrong
    # name), and a frame that stayed alive is never <unknown>.
    assert r["unknown_frames"] <= 0.01 * r["exec_frames"], r
    assert r["code_objects_kept"] >= r["functions"], r
    assert r["unknown_elsewhere"] == 0, r


def test_recursion_ten_thousand_deep_is_truncated_to_256_frames_and_marked():
    depth = scale(10_000, 50_000)
    _, r = run_workload("rel_stress.py", "recursion", depth, timeout=scale(120, 600))
    figure("deep_recursion", depth=depth, samples=r["samples"], deep=r["deep"])
    # 0.3 s of CPU at 1 ms: ~75 samples on a quiet machine, fewer but heavier under load
    assert r["deep"] >= 3 and r["deep_weight_s"] >= 0.2, r
    assert r["well_formed"] == r["deep"]
    assert r["truncated_stacks"] >= r["deep"]
    assert r["walk_errors"] == 0


def test_asyncio_with_a_thousand_tasks():
    tasks = scale(1000, 10_000)
    _, r = run_workload("rel_stress.py", "asyncio", tasks, timeout=scale(120, 900))
    figure("asyncio_tasks", tasks=r["tasks"], samples=r["samples"], task_samples=r["task_samples"])
    assert r["tasks"] == tasks
    assert abs(r["weight_s"] - r["cpu_s"]) <= 0.15 * r["cpu_s"], r
    assert r["task_samples"] > 0.3 * r["samples"], r
    assert r["task_on_hot_line"] > 0.5 * r["task_samples"], r
    assert r["task_under_run"] == r["task_samples"]


def test_generators_and_coroutines_suspended_and_resumed_across_samples():
    n = scale(100, 1000)
    _, r = run_workload("rel_stress.py", "suspend", n, timeout=scale(120, 600))
    figure("suspended_frames", generators=n, coroutines=n, rounds=r["rounds"], samples=r["samples"])
    assert r["gen_samples"] > 50 and r["coro_samples"] > 50, r
    # A resumed frame sits under the frame that resumed it, on the line that did. The workload
    # also drops suspended generators, and closing one runs it once more, at its yield, under
    # the line that dropped it (CI saw one sample off the resuming line twice: in 123 on
    # 3.12, in 117 on 3.11; a workload closing a hundred generators a round shows them on
    # 3.9, 3.11 and 3.12, not on 3.13 and 3.15, which skip running a generator with no
    # handler to close it). A torn chain keeps only
    # its leaf, marked truncated (once in five one-second runs of that workload on 3.12): it
    # has no parent to be wrong about, and is at most a few here. Any other stack is in r
    # (gen_parent_other, coro_parent_other).
    others = (r["gen_parent_other"], r["coro_parent_other"])  # pytest cuts a long dict short
    assert r["gen_parent_ok"] + r["gen_closing"] + r["gen_torn"] == r["gen_samples"], others
    assert r["coro_parent_ok"] + r["coro_torn"] == r["coro_samples"], others
    assert r["gen_torn"] + r["coro_torn"] <= 3, r
    assert r["gen_line_ok"] > 0.5 * r["gen_samples"], r


def test_gc_storms_over_cyclic_garbage_and_dying_code():
    seconds = scale(2.0, 20.0)
    _, r = run_workload("rel_stress.py", "gc", seconds, timeout=scale(120, 600))
    figure(
        "gc_storm",
        seconds=seconds,
        collections=r["collections"],
        cycles=r["cycles_made"],
        samples=r["samples"],
    )
    assert r["collections"] > 20
    assert r["wrong"] == []
    assert {"make_cycles", "collector"} <= set(r["functions"]), r
    assert r["collector_samples"] > 10, r
