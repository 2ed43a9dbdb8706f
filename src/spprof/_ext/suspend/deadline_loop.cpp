// suspend/deadline_loop.cpp: DeadlineSchedule (see deadline_loop.h).
#include "deadline_loop.h"

namespace spprof {

uint64_t DeadlineSchedule::start(uint64_t now) {
    missed_ = 0;
    next_ = now + interval_;
    return next_;
}

uint64_t DeadlineSchedule::advance(uint64_t now, uint64_t periods) {
    next_ += (periods ? periods : 1) * interval_;
    if (next_ <= now) {
        // Behind: skip every deadline at or before `now`, keeping the phase. One division,
        // so a long stall (a laptop lid closed for an hour) costs no loop.
        const uint64_t behind = (now - next_) / interval_ + 1;
        missed_ += behind;
        next_ += behind * interval_;
    }
    return next_;
}

}  // namespace spprof
