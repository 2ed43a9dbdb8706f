// exit_dump.cpp: the .spprof file written without the GIL (exit_dump.h).
#include "exit_dump.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "../platform/platform.h"
#include "../signal_handler.h"
#include "session.h"

namespace spprof {
namespace {

static_assert(std::atomic<bool>::is_always_lock_free, "read by the watcher without locks");
static_assert(std::atomic<int>::is_always_lock_free, "read by the watcher without locks");

// What to write: set and cleared with the GIL held (and a SessionMutation), read by the
// watcher only after it froze the session.
struct Armed {
    const Session* session;
    std::string path;
    std::string meta_members;
};
std::atomic<Armed*> g_armed{nullptr};
// The freeze: a store-buffering pair (mutation: raise the count, then read the flag; writer:
// set the flag, then read the count), so every access is sequentially consistent.
std::atomic<bool> g_frozen{false};
std::atomic<int> g_mutating{0};

// How long the writer waits for a mutation in flight (a drain pass takes milliseconds).
constexpr auto kMutationWait = std::chrono::milliseconds(500);

[[noreturn]] void park_forever() {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// ---- gzip with stored (uncompressed) deflate blocks: no zlib needed, any reader reads it --

uint32_t crc32_update(uint32_t crc, const unsigned char* p, size_t n) {
    static uint32_t table[256];
    static bool ready = false;  // the watcher is the only caller, once
    if (!ready) {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = true;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

void put_u16(std::string& out, uint32_t v) {
    out.push_back(static_cast<char>(v & 0xFF));
    out.push_back(static_cast<char>((v >> 8) & 0xFF));
}

void put_u32(std::string& out, uint32_t v) {
    put_u16(out, v & 0xFFFF);
    put_u16(out, v >> 16);
}

void put_u64(std::string& out, uint64_t v) {
    put_u32(out, static_cast<uint32_t>(v));
    put_u32(out, static_cast<uint32_t>(v >> 32));
}

std::string gzip_stored(const std::string& body) {
    std::string out;
    out.reserve(body.size() + body.size() / 65535 * 5 + 32);
    const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};  // deflate, mtime 0, Unix
    out.append(reinterpret_cast<const char*>(header), sizeof header);
    size_t pos = 0;
    do {
        const size_t n = std::min<size_t>(body.size() - pos, 65535);
        const bool last = pos + n == body.size();
        out.push_back(static_cast<char>(last ? 1 : 0));  // BFINAL, BTYPE 00 (stored)
        put_u16(out, static_cast<uint32_t>(n));
        put_u16(out, static_cast<uint32_t>(~n & 0xFFFF));
        out.append(body, pos, n);
        pos += n;
    } while (pos < body.size());
    put_u32(out, crc32_update(0, reinterpret_cast<const unsigned char*>(body.data()), body.size()));
    put_u32(out, static_cast<uint32_t>(body.size()));
    return out;
}

// ---- JSON ---------------------------------------------------------------------------------

void json_string(std::string& out, const std::string& s) {
    out.push_back('"');
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(ch);
        } else if (c < 0x20) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            out.append(esc);
        } else {
            out.push_back(ch);  // UTF-8 as the resolver stored it
        }
    }
    out.push_back('"');
}

void json_uint(std::string& out, uint64_t v) { out.append(std::to_string(v)); }

// ---- the .spprof body (output/spprof_format.py: version 1, or 2 with folded rows) -----------

constexpr uint8_t kVersionPlain = 1;
constexpr uint8_t kVersionFolds = 2;  // META has row_count and folds
constexpr uint8_t kTimeRaw = 1;  // TIME section kind: plain timestamps

void section(std::string& out, const char tag[4], const std::string& payload) {
    out.append(tag, 4);
    put_u64(out, payload.size());
    out.append(payload);
}

// Byte plane k (of `width`-byte records) for each k in [first, last).
std::string planes(const unsigned char* data, size_t count, size_t width, size_t first, size_t last) {
    std::string out;
    out.reserve(count * (last - first));
    for (size_t k = first; k < last; ++k)
        for (size_t i = 0; i < count; ++i) out.push_back(static_cast<char>(data[i * width + k]));
    return out;
}

std::string body_of(const Session& s, const std::string& meta_members, uint64_t* samples) {
    const Resolver& res = s.resolver();
    const StackStore& store = s.store();
    const std::vector<ThreadRecord>& recs = s.threads();
    // Rows as held (a blocked thread's wait is one, with its count in folds), renumbered as
    // export_profile does: the thread list has no gaps.
    std::vector<SampleRow> rows(store.row_count());
    if (!rows.empty()) store.copy_rows(rows.data());
    const std::vector<std::pair<size_t, uint64_t>> folds = store.folds();
    const uint8_t version = folds.empty() ? kVersionPlain : kVersionFolds;
    std::vector<uint32_t> index(recs.size(), 0);
    uint32_t kept = 0;
    for (size_t i = 0; i < recs.size(); ++i)
        if (!recs[i].free) index[i] = kept++;
    for (SampleRow& r : rows) {
        const uint32_t id = r.thread_and_flags & kSerialMask;
        r.thread_and_flags = (r.thread_and_flags & ~kSerialMask) | (id < index.size() ? index[id] : 0);
    }
    *samples = store.sample_count();

    const CaptureStats cs = capture_stats();
    const uint64_t dropped = cs.dropped_full + cs.dropped_busy + s.counters().dropped_memory;
    const uint64_t now = platform_monotonic_ns();
    std::string meta = "{\"format\":\"spprof\",\"version\":";
    json_uint(meta, version);
    meta += ",\"sample_count\":";
    json_uint(meta, store.sample_count());
    if (!folds.empty()) {
        meta += ",\"row_count\":";
        json_uint(meta, rows.size());
        meta += ",\"folds\":[";
        for (size_t i = 0; i < folds.size(); ++i) {
            if (i) meta += ",";
            json_uint(meta, folds[i].first);
            meta += ",";
            json_uint(meta, folds[i].second);
        }
        meta += "]";
    }
    meta += ",";
    meta += meta_members;
    meta += ",\"duration_ns\":";
    json_uint(meta, now > s.start_ns() ? now - s.start_ns() : 0);
    meta += ",\"start_ns\":";
    json_uint(meta, s.start_ns());
    meta += ",\"dropped_count\":";
    json_uint(meta, dropped);
    meta += ",\"stats\":{\"written_without_gil\":1,\"timer\":";
    json_string(meta, s.timer_name());
    meta += ",\"samples_captured\":";
    json_uint(meta, cs.captured);
    meta += ",\"samples_dropped\":";
    json_uint(meta, dropped);
    meta += "},\"threads\":[";
    bool first = true;
    for (size_t i = 0; i < recs.size(); ++i) {
        const ThreadRecord& r = recs[i];
        if (r.free) continue;
        if (!first) meta += ",";
        first = false;
        meta += "{\"serial\":";
        json_uint(meta, index[i]);
        meta += ",\"ident\":";
        json_uint(meta, r.ident);
        meta += ",\"native_id\":";
        json_uint(meta, r.native_tid);
        meta += ",\"name\":";
        json_string(meta, r.name);
        meta += ",\"cpu_ns\":";
        json_uint(meta, r.cpu_last_ns >= r.cpu_start_ns ? r.cpu_last_ns - r.cpu_start_ns : 0);
        meta += ",\"registered_ns\":";
        json_uint(meta, r.registered_ns);
        meta += ",\"ended_ns\":";
        json_uint(meta, r.ended_ns);
        meta += "}";
    }
    meta += "],\"strings\":[";
    const StringTable& str = res.strings();
    for (uint32_t i = 0; i < str.size(); ++i) {
        if (i) meta += ",";
        json_string(meta, str.at(i));
    }
    meta += "],\"frames\":[";
    for (size_t i = 0; i < res.frames().size(); ++i) {
        const FrameInfo& f = res.frames()[i];
        if (i) meta += ",";
        meta += "[" + std::to_string(f.name) + "," + std::to_string(f.qualname) + "," + std::to_string(f.file) + "," +
                std::to_string(f.line) + "," + std::to_string(f.first_line) + "," + (f.native ? "1" : "0") + "]";
    }
    meta += "],\"stacks\":[";
    for (uint32_t id = 0; id < store.stack_count(); ++id) {
        if (id) meta += ",";
        meta += "[0";  // no shared prefix: simpler, and the loader takes it
        for (uint32_t k = store.begin(id); k < store.end(id); ++k) meta += "," + std::to_string(store.pool()[k]);
        meta += "]";
    }
    meta += "]}";

    std::string body = "SPPROF";
    body.push_back('\0');
    body.push_back(static_cast<char>(version));
    section(body, "META", meta);
    std::string time(1, static_cast<char>(kTimeRaw));
    const auto* bytes = reinterpret_cast<const unsigned char*>(rows.data());
    time += planes(bytes, rows.size(), sizeof(SampleRow), 0, 8);
    section(body, "TIME", time);
    section(body, "ROWS", planes(bytes, rows.size(), sizeof(SampleRow), 8, sizeof(SampleRow)));
    section(body, "END!", std::string());
    return body;
}

}  // namespace

SessionMutation::SessionMutation() {
    g_mutating.fetch_add(1);
    if (g_frozen.load()) {
        g_mutating.fetch_sub(1);
        park_forever();
    }
}

SessionMutation::~SessionMutation() { g_mutating.fetch_sub(1); }

void exit_dump_arm(const Session* session, const std::string& path, const std::string& meta_members) {
    Armed* old = g_armed.exchange(new Armed{session, path, meta_members});
    delete old;
}

void exit_dump_disarm() { delete g_armed.exchange(nullptr); }

ExitDumpResult exit_dump_write() {
    ExitDumpResult result;
    g_frozen.store(true);
    const auto deadline = std::chrono::steady_clock::now() + kMutationWait;
    while (g_mutating.load() != 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            result.why = "the session was being changed";
            return result;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const Armed* armed = g_armed.load();
    if (armed == nullptr || armed->session == nullptr) {
        result.why = "no session with an output path";
        return result;
    }
    result.path = armed->path;
    const std::string data = gzip_stored(body_of(*armed->session, armed->meta_members, &result.samples));
    // A temporary file beside it, then a rename, as the Python writers do: never half a file.
    const std::string tmp = armed->path + ".spprof-tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) {
        result.why = "the file could not be opened";
        return result;
    }
    const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
    result.written = std::fclose(f) == 0 && ok && std::rename(tmp.c_str(), armed->path.c_str()) == 0;
    if (!result.written) {
        std::remove(tmp.c_str());
        result.why = "the file could not be written";
    }
    return result;
}

}  // namespace spprof
