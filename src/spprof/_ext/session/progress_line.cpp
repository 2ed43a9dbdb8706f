// progress_line.cpp: the live status line (see progress_line.h).
#include "progress_line.h"

#include <unistd.h>

#include <cstdio>

namespace spprof {

bool ProgressLine::due(uint64_t now_ns) {
    if (now_ns - last_ns_ < 1'000'000'000ull) return false;
    last_ns_ = now_ns;
    return true;
}

void ProgressLine::show(uint64_t elapsed_ns, size_t samples, unsigned long long dropped, size_t threads) {
    char line[160];
    const int n = std::snprintf(line, sizeof line,
                                "\r\033[Kspprof: recording %.0fs, %zu samples, %llu dropped, %zu threads",
                                static_cast<double>(elapsed_ns) / 1e9, samples, dropped, threads);
    if (n > 0) {
        ssize_t ignored = write(2, line, static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1);
        (void)ignored;
        shown_ = true;
    }
}

void ProgressLine::clear() {
    if (!shown_) return;
    static const char kClear[] = "\r\033[K";
    ssize_t ignored = write(2, kClear, sizeof kClear - 1);
    (void)ignored;
}

}  // namespace spprof
