// utf8_text.h: bytes from the OS (a library's path, an ELF symbol's name, a thread's name, a
// code object's file name that Python decoded with surrogateescape) as UTF-8 text. Every such
// string reaches Python as str, decoded strictly: one library at a path that is not UTF-8, or
// one C thread named in Latin-1, made stop() raise UnicodeDecodeError and lost the profile.
// Bytes that are not part of a valid UTF-8 sequence are written \xNN, as Python's
// backslashreplace writes them. utf8_sequence_length is also the Rust demangler's rule for a
// str constant's bytes. Pure; normal context.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace spprof {

// The length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 when there is none
// (a stray continuation byte, a truncated or overlong sequence, a surrogate, > U+10FFFF).
inline size_t utf8_sequence_length(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    if (c < 0x80) return 1;
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;  // overlong
        if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;  // overlong
        if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    if (b(i + 1) < lo || b(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
    return n;
}

// s itself when it is valid UTF-8 (the common case: no copy beyond the result), else s with
// each byte outside a valid sequence written as \xNN.
inline std::string utf8_text(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    static constexpr char kHex[] = "0123456789abcdef";
    for (size_t i = 0; i < s.size();) {
        const size_t n = utf8_sequence_length(s, i);
        if (n > 0) {
            out.append(s.data() + i, n);
            i += n;
            continue;
        }
        const auto c = static_cast<unsigned char>(s[i++]);
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 0xF];
    }
    return out;
}

}  // namespace spprof
