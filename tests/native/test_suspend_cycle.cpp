// test_suspend_cycle.cpp: the suspend -> get state -> copy -> resume cycle over a fake thread
// layer: every successful suspend is matched by exactly one effective resume on every path, a
// failed suspend is never resumed, KERN_ABORTED is retried a bounded number of times, and the
// copy runs only while the thread is suspended.
#include <cstdint>
#include <deque>
#include <map>

#include "harness.h"
#include "suspend/suspend_cycle.h"

using namespace spprof;

namespace {

struct FakeLayer {
    using Handle = int;
    std::deque<SuspendStatus> suspend_script;  // empty = kOk
    std::deque<ResumeStatus> resume_script;    // empty = kOk
    bool state_ok = true;
    std::map<int, int> suspend_count;          // the "kernel" suspend count per thread
    int suspend_calls = 0, resume_calls = 0, state_calls = 0;
    int resume_without_suspension = 0;
    uint64_t clock = 0;

    SuspendStatus suspend(Handle h) {
        ++suspend_calls;
        SuspendStatus s = SuspendStatus::kOk;
        if (!suspend_script.empty()) {
            s = suspend_script.front();
            suspend_script.pop_front();
        }
        if (s == SuspendStatus::kOk) ++suspend_count[h];
        return s;
    }
    bool get_state(Handle h, RegisterContext* out) {
        ++state_calls;
        if (suspend_count[h] == 0) ++resume_without_suspension;  // reading a running thread
        out->pc = 0x1234;
        out->fp = 0x5678;
        return state_ok;
    }
    ResumeStatus resume(Handle h) {
        ++resume_calls;
        if (suspend_count[h] == 0) ++resume_without_suspension;
        ResumeStatus r = ResumeStatus::kOk;
        if (!resume_script.empty()) {
            r = resume_script.front();
            resume_script.pop_front();
        }
        if (r == ResumeStatus::kOk || r == ResumeStatus::kGone) --suspend_count[h];
        return r;
    }
    uint64_t now_ns() { return clock += 7; }
};

}  // namespace

TEST(cycle_success_resumes_once_and_copies_while_suspended) {
    FakeLayer layer;
    bool copied_while_suspended = false;
    const CycleResult r = suspend_and_copy(layer, 1, [&](const RegisterContext& regs) {
        copied_while_suspended = layer.suspend_count[1] == 1 && regs.pc == 0x1234;
    });
    CHECK(r.outcome == CycleResult::kSampled);
    CHECK(copied_while_suspended);
    CHECK_EQ(layer.suspend_calls, 1);
    CHECK_EQ(layer.resume_calls, 1);
    CHECK_EQ(layer.suspend_count[1], 0);
    CHECK(r.suspended_ns > 0);
    CHECK_EQ(r.regs.fp, 0x5678ull);
}

TEST(cycle_failed_or_gone_suspend_is_never_resumed) {
    for (SuspendStatus s : {SuspendStatus::kGone, SuspendStatus::kFailed}) {
        FakeLayer layer;
        layer.suspend_script = {s};
        bool copied = false;
        const CycleResult r = suspend_and_copy(layer, 2, [&](const RegisterContext&) { copied = true; });
        CHECK(r.outcome == (s == SuspendStatus::kGone ? CycleResult::kGone
                                                       : CycleResult::kSuspendFailed));
        CHECK(!copied);
        CHECK_EQ(layer.resume_calls, 0);
        CHECK_EQ(layer.state_calls, 0);
        CHECK_EQ(layer.suspend_calls, 1);  // gone/failed are not retried
    }
}

TEST(cycle_retries_aborted_suspend_bounded) {
    FakeLayer layer;
    layer.suspend_script = {SuspendStatus::kAborted, SuspendStatus::kAborted, SuspendStatus::kOk};
    CycleResult r = suspend_and_copy(layer, 3, [](const RegisterContext&) {});
    CHECK(r.outcome == CycleResult::kSampled);
    CHECK_EQ(r.suspend_attempts, 3);
    CHECK_EQ(layer.resume_calls, 1);
    CHECK_EQ(layer.suspend_count[3], 0);

    FakeLayer always;
    for (int i = 0; i < 10; ++i) always.suspend_script.push_back(SuspendStatus::kAborted);
    r = suspend_and_copy(always, 3, [](const RegisterContext&) {});
    CHECK(r.outcome == CycleResult::kSuspendFailed);
    CHECK_EQ(always.suspend_calls, kMaxSuspendAttempts);
    CHECK_EQ(always.resume_calls, 0);
}

TEST(cycle_state_failure_still_resumes_and_skips_copy) {
    FakeLayer layer;
    layer.state_ok = false;
    bool copied = false;
    const CycleResult r = suspend_and_copy(layer, 4, [&](const RegisterContext&) { copied = true; });
    CHECK(r.outcome == CycleResult::kStateFailed);
    CHECK(!copied);
    CHECK_EQ(layer.resume_calls, 1);
    CHECK_EQ(layer.suspend_count[4], 0);
}

TEST(cycle_resume_outcomes) {
    FakeLayer aborted;
    aborted.resume_script = {ResumeStatus::kAborted, ResumeStatus::kOk};
    CycleResult r = suspend_and_copy(aborted, 5, [](const RegisterContext&) {});
    CHECK(r.outcome == CycleResult::kSampled);
    CHECK_EQ(aborted.resume_calls, 2);
    CHECK_EQ(aborted.suspend_count[5], 0);

    FakeLayer gone;
    gone.resume_script = {ResumeStatus::kGone};
    r = suspend_and_copy(gone, 6, [](const RegisterContext&) {});
    CHECK(r.outcome == CycleResult::kSampled);
    CHECK(r.gone_after);

    FakeLayer failed;
    failed.resume_script = {ResumeStatus::kFailed};
    r = suspend_and_copy(failed, 7, [](const RegisterContext&) {});
    CHECK(r.outcome == CycleResult::kResumeFailed);
    CHECK_EQ(failed.resume_calls, 1);  // a failed resume is not blindly repeated

    FakeLayer stuck;
    for (int i = 0; i < 10; ++i) stuck.resume_script.push_back(ResumeStatus::kAborted);
    r = suspend_and_copy(stuck, 8, [](const RegisterContext&) {});
    CHECK(r.outcome == CycleResult::kResumeFailed);
    CHECK_EQ(stuck.resume_calls, kMaxResumeAttempts);
}

TEST(scoped_suspension_resumes_on_scope_exit) {
    FakeLayer layer;
    {
        ScopedSuspension<FakeLayer> s(layer, 9);
        CHECK(s.suspended());
        CHECK_EQ(layer.suspend_count[9], 1);
    }  // no explicit resume: the destructor does it
    CHECK_EQ(layer.suspend_count[9], 0);
    CHECK_EQ(layer.resume_calls, 1);
    {
        ScopedSuspension<FakeLayer> s(layer, 9);
        CHECK(s.resume() == ResumeStatus::kOk);
        CHECK(s.resume() == ResumeStatus::kOk);  // second call is a no-op
    }
    CHECK_EQ(layer.resume_calls, 2);
    CHECK_EQ(layer.resume_without_suspension, 0);
}

TEST(cycle_randomised_suspend_resume_balance) {
    // Thousands of cycles with random layer behaviour over 16 threads: whatever happens, each
    // thread's suspend count returns to zero unless the resume truly failed, no resume is
    // issued without a suspension, and the stats add up.
    FakeLayer layer;
    SuspendStats stats;
    spprof_test::XorShift rnd{0x2545F4914F6CDD1Dull};
    int expected_stuck = 0, sampled = 0, skipped = 0, state_failed = 0;
    for (int i = 0; i < 20000; ++i) {
        const int h = static_cast<int>(rnd(16));
        layer.suspend_script.clear();
        layer.resume_script.clear();
        const uint32_t aborts = rnd(5);
        for (uint32_t a = 0; a < aborts; ++a) layer.suspend_script.push_back(SuspendStatus::kAborted);
        const SuspendStatus finals[] = {SuspendStatus::kOk, SuspendStatus::kOk, SuspendStatus::kOk,
                                        SuspendStatus::kGone, SuspendStatus::kFailed};
        layer.suspend_script.push_back(finals[rnd(5)]);
        const uint32_t raborts = rnd(3);
        for (uint32_t a = 0; a < raborts; ++a) layer.resume_script.push_back(ResumeStatus::kAborted);
        const ResumeStatus rfinals[] = {ResumeStatus::kOk, ResumeStatus::kOk, ResumeStatus::kOk,
                                        ResumeStatus::kOk, ResumeStatus::kGone, ResumeStatus::kFailed};
        layer.resume_script.push_back(rfinals[rnd(6)]);
        layer.state_ok = rnd(10) != 0;
        const int before = layer.suspend_count[h];
        bool copy_ok = true;
        const CycleResult r = suspend_and_copy(layer, h, [&](const RegisterContext&) {
            if (layer.suspend_count[h] != before + 1) copy_ok = false;
        });
        CHECK(copy_ok);
        record_cycle(stats, r);
        switch (r.outcome) {
            case CycleResult::kSampled: ++sampled; break;
            case CycleResult::kGone:
            case CycleResult::kSuspendFailed: ++skipped; break;
            case CycleResult::kStateFailed: ++state_failed; break;
            case CycleResult::kResumeFailed: ++expected_stuck; break;
        }
        if (r.outcome == CycleResult::kResumeFailed) {
            CHECK_EQ(layer.suspend_count[h], before + 1);
            --layer.suspend_count[h];  // "a human resumed it": keep later cycles independent
        } else {
            CHECK_EQ(layer.suspend_count[h], before);
        }
    }
    CHECK_EQ(layer.resume_without_suspension, 0);
    const SuspendStatsSnapshot s = stats.snapshot();
    CHECK_EQ(s.threads_sampled, static_cast<uint64_t>(sampled));
    CHECK_EQ(s.threads_skipped, static_cast<uint64_t>(skipped));
    CHECK_EQ(s.walk_errors, static_cast<uint64_t>(state_failed));
    CHECK_EQ(s.resume_failures, static_cast<uint64_t>(expected_stuck));
    CHECK(sampled > 0 && skipped > 0 && state_failed > 0 && expected_stuck > 0);
    CHECK(s.max_suspend_ns > 0 && s.total_suspend_ns >= s.max_suspend_ns);
}
