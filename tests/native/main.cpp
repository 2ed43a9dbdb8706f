// main.cpp: runs every registered native test; exits non-zero when one fails.
#include <cstring>

#include "harness.h"

int main(int argc, char** argv) {
    int passed = 0, failed = 0;
    for (const auto& t : spprof_test::registry()) {
        if (argc > 1 && std::strstr(t.name, argv[1]) == nullptr) continue;
        bool f = false;
        t.fn(&f);
        std::printf("%s %s\n", f ? "FAIL" : "ok  ", t.name);
        (f ? failed : passed)++;
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
