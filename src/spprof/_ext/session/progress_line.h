// progress_line.h: the CLI's live status line on stderr while a session records.
//
// One carriage-returned line at most once a second ("spprof: recording 12s, 3400 samples,
// 0 dropped, 5 threads"), erased when the session stops. write(2) only, no allocation.
// Drain thread (or stop()), one caller at a time; needs no GIL.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spprof {

class ProgressLine {
public:
    // True (and the next line is a second away) when a line is due at `now_ns`.
    bool due(uint64_t now_ns);
    // Writes the line.
    void show(uint64_t elapsed_ns, size_t samples, unsigned long long dropped, size_t threads);
    // Erases the line, if one was shown.
    void clear();

private:
    uint64_t last_ns_ = 0;
    bool shown_ = false;
};

}  // namespace spprof
