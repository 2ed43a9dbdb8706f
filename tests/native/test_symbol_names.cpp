// test_symbol_names.cpp: an image's symbol names mapped from its file (platform/images.h,
// SymbolNames): read through the mapping, shared by copies, and a file truncated in place
// afterwards gives no name instead of a SIGBUS in the drain.
#if defined(__linux__)

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness.h"
#include "platform/images.h"

namespace {

// A copy of this test program (it keeps its .symtab) at a path of its own.
std::string copy_of_self() {
    char path[] = "/tmp/spprof_symbol_names_XXXXXX";
    const int out = mkstemp(path);
    const int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0) return "";
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, static_cast<size_t>(n)) != n) return "";
    close(in);
    close(out);
    return path;
}

}  // namespace

TEST(symbol_names_are_mapped_from_the_file_and_shared_by_copies) {
    const std::string path = copy_of_self();
    CHECK(!path.empty());
    spprof::ImageSymbols t;
    CHECK(spprof::platform_read_function_symbols(path.c_str(), &t));
    CHECK(t.names.mapped());
    CHECK(!t.syms.empty());
    // Some symbol of this program is named as nm names it.
    bool found = false;
    std::string name;
    for (const spprof::ImageSymbol& s : t.syms) {
        CHECK(t.names.name_at(s.name, &name));
        if (name == "main") found = true;
    }
    CHECK(found);
    const spprof::ImageSymbols copy = t;  // the symbolizer installs copies per module
    CHECK(copy.names.mapped());
    CHECK(copy.names.name_at(t.syms.front().name, &name) && !name.empty());
    std::string all;
    CHECK(t.names.copy_all(&all) && all.size() == t.names.size());
    unlink(path.c_str());
}

TEST(symbol_names_of_a_file_truncated_since_are_no_names_not_a_fault) {
    const std::string path = copy_of_self();
    spprof::ImageSymbols t;
    CHECK(spprof::platform_read_function_symbols(path.c_str(), &t));
    CHECK(t.names.mapped());
    // Rewritten in place (cp over it, a strip that copies back): the table's pages are gone.
    CHECK(truncate(path.c_str(), 4096) == 0);
    std::string name;
    size_t named = 0;
    for (const spprof::ImageSymbol& s : t.syms)
        if (t.names.name_at(s.name, &name)) ++named;
    CHECK_EQ(named, size_t{0});
    std::string all;
    CHECK(!t.names.copy_all(&all));
    unlink(path.c_str());
}

#endif  // __linux__
