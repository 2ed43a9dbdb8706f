// unwind/rust_demangle.cpp: the Rust v0 demangler (see rust_demangle.h).
//
// One recursive-descent printer over the grammar's productions. Positions are counted from just
// after "_R", as backrefs are. While an impl-path or an instantiating crate is skipped (never
// shown), printing is off and backrefs are not followed: the grammar makes each production
// self-terminating, so skipping is linear.
#include "unwind/rust_demangle.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "utf8_text.h"

namespace spprof {

namespace {

std::atomic<uint64_t> g_over_limit{0};  // rust_names_over_limit()

// Parse steps per symbol (each path, type, const entered counts one): a backref chain that prints
// nothing must still end.
constexpr uint32_t kMaxSteps = uint32_t{1} << 18;
// Lifetimes a single binder may introduce, and code points of one punycode identifier: real
// symbols stay far below; the caps keep the arithmetic and the output bounded.
constexpr uint64_t kMaxBinderLifetimes = 1024;
constexpr size_t kMaxPunycodePoints = 1024;

bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The basic type of a lower-case tag, or nullptr ('p', the placeholder, is handled apart).
const char* basic_type(char c) {
    switch (c) {
        case 'a': return "i8";
        case 'b': return "bool";
        case 'c': return "char";
        case 'd': return "f64";
        case 'e': return "str";
        case 'f': return "f32";
        case 'h': return "u8";
        case 'i': return "isize";
        case 'j': return "usize";
        case 'l': return "i32";
        case 'm': return "u32";
        case 'n': return "i128";
        case 'o': return "u128";
        case 's': return "i16";
        case 't': return "u16";
        case 'u': return "()";
        case 'v': return "...";
        case 'x': return "i64";
        case 'y': return "u64";
        case 'z': return "!";
        default: return nullptr;
    }
}

void append_utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
        out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

// What may follow a symbol's path, as rustc's demangler takes it: nothing, or a '.' and then
// ASCII letters, digits and punctuation only (".llvm.1234", ".cold.1").
bool symbol_like_suffix(const char* p, size_t n) {
    if (n == 0) return true;
    if (p[0] != '.') return false;
    for (size_t i = 0; i < n; ++i)
        if (p[i] <= ' ' || p[i] > '~') return false;
    return true;
}

bool valid_scalar(uint64_t cp) { return cp < 0x110000 && !(cp >= 0xD800 && cp <= 0xDFFF); }

// RFC 3492's bias adaptation.
uint64_t punycode_adapt(uint64_t delta, uint64_t points, bool first) {
    constexpr uint64_t kBase = 36, kTMin = 1, kTMax = 26, kSkew = 38, kDamp = 700;
    delta = first ? delta / kDamp : delta / 2;
    delta += delta / points;
    uint64_t k = 0;
    while (delta > ((kBase - kTMin) * kTMax) / 2) {
        delta /= kBase - kTMin;
        k += kBase;
    }
    return k + (kBase - kTMin + 1) * delta / (delta + kSkew);
}

// Rust's punycode: RFC 3492 decoding with '_' in place of '-' as the delimiter of the basic
// (ASCII) part. Appends UTF-8 to `out`; false on malformed input.
bool punycode_decode(const char* p, size_t n, std::string* out) {
    constexpr uint64_t kBase = 36, kTMin = 1, kTMax = 26;
    std::vector<uint32_t> points;
    size_t enc = 0;  // start of the encoded part
    for (size_t i = n; i-- > 0;) {
        if (p[i] == '_') {
            for (size_t j = 0; j < i; ++j) points.push_back(static_cast<unsigned char>(p[j]));
            enc = i + 1;
            break;
        }
    }
    if (enc >= n) return false;  // nothing encoded: not a punycode identifier
    uint64_t code = 0x80, i = 0, bias = 72;
    size_t at = enc;
    while (at < n) {
        const uint64_t old_i = i;
        uint64_t w = 1;
        for (uint64_t k = kBase;; k += kBase) {
            if (at >= n) return false;
            const char c = p[at++];
            uint64_t digit;
            if (is_lower(c)) digit = static_cast<uint64_t>(c - 'a');
            else if (is_digit(c)) digit = static_cast<uint64_t>(c - '0') + 26;
            else return false;
            if (digit > (UINT32_MAX - i) / w) return false;  // keeps i, and so n, in range
            i += digit * w;
            const uint64_t t = k <= bias ? kTMin : (k >= bias + kTMax ? kTMax : k - bias);
            if (digit < t) break;
            if (w > UINT32_MAX / (kBase - t)) return false;
            w *= kBase - t;
        }
        const uint64_t len = points.size() + 1;
        bias = punycode_adapt(i - old_i, len, old_i == 0);
        code += i / len;
        i %= len;
        if (!valid_scalar(code) || code < 0x80 || points.size() >= kMaxPunycodePoints) return false;
        points.insert(points.begin() + static_cast<std::ptrdiff_t>(i), static_cast<uint32_t>(code));
        ++i;
    }
    for (uint32_t cp : points) append_utf8(cp, out);
    return true;
}

struct Ident {
    const char* bytes = nullptr;
    size_t len = 0;
    bool punycode = false;
};

class V0Printer {
public:
    V0Printer(const char* s, size_t n) : s_(s), n_(n) {}

    bool limit_hit() const { return limit_hit_; }

    bool run(std::string* out) {
        if (is_digit(peek())) return false;  // an encoding version: none is defined yet
        if (!path(true)) return false;
        if (is_upper(peek())) {  // the instantiating crate: not shown
            print_ = false;
            if (!path(false)) return false;
            print_ = true;
        }
        if (pos_ < n_) {
            // A vendor suffix: LLVM's ".llvm.NNNN" (LTO's renaming) is noise; others (".cold")
            // say which part of the function this is, and stay.
            if (!symbol_like_suffix(s_ + pos_, n_ - pos_)) return false;
            static const char kLlvm[] = ".llvm.";
            if (!(n_ - pos_ >= sizeof kLlvm - 1 && std::memcmp(s_ + pos_, kLlvm, sizeof kLlvm - 1) == 0))
                emit(s_ + pos_, n_ - pos_);
        }
        if (!ok_) return false;
        *out = std::move(out_);
        return true;
    }

private:
    // Counts depth while a production is being read; fails past the limits.
    class Enter {
    public:
        explicit Enter(V0Printer* p) : p_(p) {
            ++p_->depth_;
            ++p_->steps_;
            if (p_->depth_ > kRustMaxDepth || p_->steps_ > kMaxSteps) {
                p_->ok_ = false;
                p_->limit_hit_ = true;  // (a backref cycle ends here too)
            }
        }
        ~Enter() { --p_->depth_; }
        bool ok() const { return p_->ok_; }

    private:
        V0Printer* p_;
    };

    char peek() const { return pos_ < n_ ? s_[pos_] : '\0'; }
    bool eat(char c) {
        if (pos_ < n_ && s_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    char next() { return pos_ < n_ ? s_[pos_++] : '\0'; }

    void emit(const char* p, size_t n) {
        if (!print_) return;
        if (out_.size() + n > kRustMaxOutputBytes) {
            ok_ = false;
            limit_hit_ = true;
            return;
        }
        out_.append(p, n);
    }
    void emit(const char* p) { emit(p, std::strlen(p)); }
    void emit_decimal(uint64_t v) {
        char buf[24];
        size_t i = sizeof buf;
        do {
            buf[--i] = static_cast<char>('0' + v % 10);
            v /= 10;
        } while (v != 0);
        emit(buf + i, sizeof buf - i);
    }

    // base-62-number: "_" is 0, otherwise the digits' value + 1, then "_".
    bool base62(uint64_t* v) {
        if (eat('_')) {
            *v = 0;
            return true;
        }
        uint64_t x = 0;
        for (;;) {
            const char c = next();
            uint64_t d;
            if (is_digit(c)) d = static_cast<uint64_t>(c - '0');
            else if (is_lower(c)) d = static_cast<uint64_t>(c - 'a') + 10;
            else if (is_upper(c)) d = static_cast<uint64_t>(c - 'A') + 36;
            else if (c == '_') break;
            else return false;
            if (x > (UINT64_MAX - d) / 62) return false;
            x = x * 62 + d;
        }
        if (x == UINT64_MAX) return false;
        *v = x + 1;
        return true;
    }

    // An optional `tag` base-62-number, 0 when absent, else the number + 1 (disambiguators).
    bool opt_tagged(char tag, uint64_t* v) {
        *v = 0;
        if (!eat(tag)) return true;
        if (!base62(v) || *v == UINT64_MAX) return false;
        ++*v;
        return true;
    }

    bool decimal(size_t* v) {
        if (!is_digit(peek())) return false;
        if (eat('0')) {
            *v = 0;
            return true;
        }
        size_t x = 0;
        while (is_digit(peek())) {
            x = x * 10 + static_cast<size_t>(next() - '0');
            if (x > n_) return false;  // longer than the symbol: malformed
        }
        *v = x;
        return true;
    }

    // undisambiguated-identifier: "u"? decimal "_"? bytes.
    bool undisambiguated(Ident* id) {
        id->punycode = eat('u');
        size_t len = 0;
        if (!decimal(&len)) return false;
        (void)eat('_');
        if (len > n_ - pos_) return false;
        id->bytes = s_ + pos_;
        id->len = len;
        pos_ += len;
        return true;
    }

    bool identifier(Ident* id, uint64_t* disambiguator) {
        return opt_tagged('s', disambiguator) && undisambiguated(id);
    }

    bool emit_ident(const Ident& id) {
        if (!id.punycode) {
            emit(id.bytes, id.len);
            return true;
        }
        if (!print_) return true;
        std::string decoded;
        if (!punycode_decode(id.bytes, id.len, &decoded)) return false;
        emit(decoded.data(), decoded.size());
        return true;
    }

    // After a 'B': reads the target and, when printing, reads `fn` there. A backref points
    // strictly before its own tag, so a chain of them ends.
    template <typename F>
    bool backref(size_t tag_pos, F fn) {
        uint64_t target = 0;
        if (!base62(&target) || target >= tag_pos) return false;
        if (!print_) return true;
        const size_t saved = pos_;
        pos_ = static_cast<size_t>(target);
        const bool ok = fn();
        pos_ = saved;
        return ok;
    }

    bool skipped_path() {
        const bool saved = print_;
        print_ = false;
        const bool ok = path(false);
        print_ = saved;
        return ok;
    }

    bool impl_path() {
        uint64_t dis = 0;
        return opt_tagged('s', &dis) && skipped_path();
    }

    bool path(bool in_value) {
        Enter e(this);
        if (!e.ok()) return false;
        const size_t tag_pos = pos_;
        switch (next()) {
            case 'C': {
                Ident id;
                uint64_t dis = 0;
                return identifier(&id, &dis) && emit_ident(id);
            }
            case 'M':
                if (!impl_path()) return false;
                emit("<");
                if (!type()) return false;
                emit(">");
                return true;
            case 'X':
                if (!impl_path()) return false;
                emit("<");
                if (!type()) return false;
                emit(" as ");
                if (!path(false)) return false;
                emit(">");
                return true;
            case 'Y':
                emit("<");
                if (!type()) return false;
                emit(" as ");
                if (!path(false)) return false;
                emit(">");
                return true;
            case 'N': {
                const char ns = next();
                if (!is_lower(ns) && !is_upper(ns)) return false;
                if (!path(in_value)) return false;
                Ident id;
                uint64_t dis = 0;
                if (!identifier(&id, &dis)) return false;
                if (is_upper(ns)) {
                    // Closures and shims have no name of their own: "{closure#N}".
                    emit("::{");
                    if (ns == 'C') emit("closure");
                    else if (ns == 'S') emit("shim");
                    else emit(&ns, 1);
                    if (id.len > 0) {
                        emit(":");
                        if (!emit_ident(id)) return false;
                    }
                    emit("#");
                    emit_decimal(dis);
                    emit("}");
                } else if (id.len > 0) {
                    emit("::");
                    if (!emit_ident(id)) return false;
                }
                return true;
            }
            case 'I':
                if (!path(in_value)) return false;
                if (in_value) emit("::");  // a value path takes a turbofish: f::<T>
                emit("<");
                if (!generic_args()) return false;
                emit(">");
                return true;
            case 'B':
                return backref(tag_pos, [this, in_value] { return path(in_value); });
            default:
                return false;
        }
    }

    // {generic-arg} "E", comma-separated.
    bool generic_args() {
        for (bool first = true; !eat('E'); first = false) {
            if (pos_ >= n_) return false;
            if (!first) emit(", ");
            if (eat('L')) {
                uint64_t idx = 0;
                if (!base62(&idx) || !lifetime(idx)) return false;
            } else if (eat('K')) {
                if (!const_value(false)) return false;
            } else if (!type()) {
                return false;
            }
        }
        return true;
    }

    // A lifetime by its de Bruijn index: 0 is erased ('_), others name a binder's lifetime
    // by its level: 'a, 'b ... 'z, then '_26 ...
    bool lifetime(uint64_t idx) {
        if (idx == 0) {
            emit("'_");
            return true;
        }
        if (idx > bound_) return false;
        emit_level(bound_ - idx);
        return true;
    }
    void emit_level(uint64_t level) {
        if (level < 26) {
            const char name[2] = {'\'', static_cast<char>('a' + level)};
            emit(name, 2);
        } else {
            emit("'_");
            emit_decimal(level);
        }
    }

    // binder? : "for<'a, 'b> " and the new lifetimes bound; the caller restores bound_.
    bool binder() {
        if (!eat('G')) return true;
        uint64_t count = 0;
        if (!base62(&count)) return false;
        ++count;
        if (count > kMaxBinderLifetimes || bound_ > kMaxBinderLifetimes) return false;
        emit("for<");
        for (uint64_t i = 0; i < count; ++i) {
            if (i > 0) emit(", ");
            emit_level(bound_ + i);
        }
        emit("> ");
        bound_ += count;
        return true;
    }

    bool type() {
        Enter e(this);
        if (!e.ok()) return false;
        const size_t tag_pos = pos_;
        const char c = peek();
        if (const char* basic = basic_type(c)) {
            ++pos_;
            emit(basic);
            return true;
        }
        switch (c) {
            case 'p':
                ++pos_;
                emit("_");
                return true;
            case 'A':
                ++pos_;
                emit("[");
                if (!type()) return false;
                emit("; ");
                if (!const_value(true)) return false;
                emit("]");
                return true;
            case 'S':
                ++pos_;
                emit("[");
                if (!type()) return false;
                emit("]");
                return true;
            case 'T': {
                ++pos_;
                emit("(");
                size_t count = 0;
                for (; !eat('E'); ++count) {
                    if (pos_ >= n_) return false;
                    if (count > 0) emit(", ");
                    if (!type()) return false;
                }
                if (count == 1) emit(",");  // (T,) is a tuple, (T) is not
                emit(")");
                return true;
            }
            case 'R':
            case 'Q': {
                ++pos_;
                emit("&");
                if (eat('L')) {
                    uint64_t idx = 0;
                    if (!base62(&idx)) return false;
                    if (idx != 0) {  // an erased lifetime is not shown on a reference
                        if (!lifetime(idx)) return false;
                        emit(" ");
                    }
                }
                if (c == 'Q') emit("mut ");
                return type();
            }
            case 'P':
                ++pos_;
                emit("*const ");
                return type();
            case 'O':
                ++pos_;
                emit("*mut ");
                return type();
            case 'F':
                ++pos_;
                return fn_sig();
            case 'D':
                ++pos_;
                return dyn_trait();
            case 'B':
                ++pos_;
                return backref(tag_pos, [this] { return type(); });
            default:
                return path(false);  // a named type; path() rejects what is no path tag
        }
    }

    // fn-sig: binder? "U"? ("K" abi)? {type} "E" type
    bool fn_sig() {
        const uint64_t saved = bound_;
        if (!binder()) return false;
        if (eat('U')) emit("unsafe ");
        if (eat('K')) {
            emit("extern \"");
            if (eat('C')) {
                emit("C");
            } else {
                Ident abi;
                if (!undisambiguated(&abi) || abi.punycode) return false;
                for (size_t i = 0; i < abi.len; ++i) {
                    const char c = abi.bytes[i] == '_' ? '-' : abi.bytes[i];  // "system_unwind"
                    emit(&c, 1);
                }
            }
            emit("\" ");
        }
        emit("fn(");
        for (bool first = true; !eat('E'); first = false) {
            if (pos_ >= n_) return false;
            if (!first) emit(", ");
            if (!type()) return false;
        }
        emit(")");
        if (eat('u')) {
            // returns (): not shown
        } else {
            emit(" -> ");
            if (!type()) return false;
        }
        bound_ = saved;
        return true;
    }

    // dyn-bounds lifetime: "dyn for<'a> Trait<Assoc = T> + Send + 'b"
    bool dyn_trait() {
        const uint64_t saved = bound_;
        emit("dyn ");
        if (!binder()) return false;
        for (bool first = true; !eat('E'); first = false) {
            if (pos_ >= n_) return false;
            if (!first) emit(" + ");
            bool open = false;  // the trait's generic argument list is still open
            if (!trait_path(&open)) return false;
            while (eat('p')) {
                emit(open ? ", " : "<");
                open = true;
                Ident name;
                if (!undisambiguated(&name) || !emit_ident(name)) return false;
                emit(" = ");
                if (!type()) return false;
            }
            if (open) emit(">");
        }
        bound_ = saved;
        if (!eat('L')) return false;
        uint64_t idx = 0;
        if (!base62(&idx)) return false;
        if (idx != 0) {
            emit(" + ");
            if (!lifetime(idx)) return false;
        }
        return true;
    }

    // A trait's path with its generic arguments left open ("Fn<(u8,)"), so that associated
    // type bindings can join them; *open says whether it was.
    bool trait_path(bool* open) {
        Enter e(this);
        if (!e.ok()) return false;
        const size_t tag_pos = pos_;
        if (eat('B')) return backref(tag_pos, [this, open] { return trait_path(open); });
        if (eat('I')) {
            if (!path(false)) return false;
            emit("<");
            if (!generic_args()) return false;
            *open = true;
            return true;
        }
        *open = false;
        return path(false);
    }

    // const: type const-data | "p" | backref
    // A const generic argument (in_value false: a value form is shown in braces, `{&[1, 2]}`)
    // or a value inside one or inside an array type's length (in_value true).
    bool const_value(bool in_value) {
        Enter e(this);
        if (!e.ok()) return false;
        const size_t tag_pos = pos_;
        if (eat('p')) {
            emit("_");
            return true;
        }
        if (eat('B')) return backref(tag_pos, [this, in_value] { return const_value(in_value); });
        const char t = next();
        const bool is_signed = t == 'a' || t == 's' || t == 'l' || t == 'x' || t == 'n' || t == 'i';
        const bool is_unsigned = t == 'h' || t == 't' || t == 'm' || t == 'y' || t == 'o' || t == 'j';
        if (is_signed || is_unsigned || t == 'b' || t == 'c') return const_leaf(t, is_signed);
        // The value forms of `adt_const_params` (str, references, arrays, tuples, ADTs).
        if (t != 'e' && t != 'R' && t != 'Q' && t != 'A' && t != 'T' && t != 'V') return false;
        if (t == 'R' && eat('e')) return const_str();  // &str: the literal itself
        if (!in_value) emit("{");
        switch (t) {
            case 'e':
                emit("*");  // a literal is a &str: *"..." is the str
                if (!const_str()) return false;
                break;
            case 'R':
            case 'Q':
                emit(t == 'R' ? "&" : "&mut ");
                if (!const_value(true)) return false;
                break;
            case 'A':
                emit("[");
                if (!const_list(nullptr)) return false;
                emit("]");
                break;
            case 'T': {
                size_t count = 0;
                emit("(");
                if (!const_list(&count)) return false;
                emit(count == 1 ? ",)" : ")");
                break;
            }
            default: {  // 'V': a path, then unit, tuple or struct fields
                if (!path(true)) return false;
                const char kind = next();
                if (kind == 'T') {
                    emit("(");
                    if (!const_list(nullptr)) return false;
                    emit(")");
                } else if (kind == 'S') {
                    emit(" { ");
                    for (bool first = true; !eat('E'); first = false) {
                        if (pos_ >= n_) return false;
                        if (!first) emit(", ");
                        Ident id;
                        uint64_t dis = 0;
                        if (!identifier(&id, &dis) || !emit_ident(id)) return false;
                        emit(": ");
                        if (!const_value(true)) return false;
                    }
                    emit(" }");
                } else if (kind != 'U') {
                    return false;
                }
            }
        }
        if (!in_value) emit("}");
        return true;
    }

    // {const} "E", comma-separated; `count` gets how many.
    bool const_list(size_t* count) {
        size_t n = 0;
        for (; !eat('E'); ++n) {
            if (pos_ >= n_) return false;
            if (n > 0) emit(", ");
            if (!const_value(true)) return false;
        }
        if (count != nullptr) *count = n;
        return true;
    }

    // Hex digits up to '_': where they start and how many.
    bool hex_nibbles(const char** hex, size_t* len) {
        *hex = s_ + pos_;
        *len = 0;
        while (pos_ < n_ && s_[pos_] != '_') {
            const char c = s_[pos_];
            if (!is_digit(c) && !(c >= 'a' && c <= 'f')) return false;
            ++pos_;
            ++*len;
        }
        return eat('_');
    }

    static unsigned nibble(char c) { return static_cast<unsigned>(is_digit(c) ? c - '0' : c - 'a' + 10); }

    // A str constant: its UTF-8 bytes in hex, shown as a quoted literal.
    bool const_str() {
        const char* hex = nullptr;
        size_t len = 0;
        if (!hex_nibbles(&hex, &len) || len % 2 != 0) return false;
        std::string bytes;
        for (size_t i = 0; i < len; i += 2)
            bytes.push_back(static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
        emit("\"");
        for (size_t i = 0; i < bytes.size();) {
            uint32_t cp = 0;
            if (!next_utf8(bytes, &i, &cp)) return false;
            emit_escaped(cp, '"');
        }
        emit("\"");
        return true;
    }

    // One code point of well-formed UTF-8 at *i (advanced past it); utf8_text.h says what
    // is well formed (no overlong form, no surrogate, nothing above U+10FFFF).
    static bool next_utf8(const std::string& b, size_t* i, uint32_t* cp) {
        const size_t n = utf8_sequence_length(b, *i);
        if (n == 0) return false;
        const auto byte = [&](size_t k) { return static_cast<unsigned char>(b[*i + k]); };
        uint32_t v = n == 1 ? byte(0) : byte(0) & (0x7F >> n);
        for (size_t k = 1; k < n; ++k) v = v << 6 | (byte(k) & 0x3F);
        *i += n;
        *cp = v;
        return true;
    }

    // An integer, bool or char constant: hex digits up to '_', leading zeros dropped.
    bool const_leaf(char t, bool is_signed) {
        const bool negative = eat('n');
        if (negative && !is_signed) return false;
        const char* hex = nullptr;
        size_t len = 0;
        if (!hex_nibbles(&hex, &len)) return false;
        while (len > 0 && *hex == '0') {
            ++hex;
            --len;
        }
        uint64_t v = 0;
        if (len <= 16) {
            for (size_t i = 0; i < len; ++i) v = v * 16 + nibble(hex[i]);
        }
        if (t == 'b') {
            if (negative || v > 1 || len > 1) return false;
            emit(v ? "true" : "false");
            return true;
        }
        if (t == 'c') {
            if (len > 8 || !valid_scalar(v)) return false;
            emit("'");
            emit_escaped(static_cast<uint32_t>(v), '\'');
            emit("'");
            return true;
        }
        if (negative) emit("-");
        if (len <= 16) {
            emit_decimal(v);
        } else {  // past 64 bits (i128, u128): hex
            emit("0x");
            emit(hex, len);
        }
        return true;
    }

    // One character of a char or str literal: the other kind of quote is left as it is.
    void emit_escaped(uint32_t cp, char quote) {
        switch (cp) {
            case '\'': emit(quote == '\'' ? "\\'" : "'"); break;
            case '"': emit(quote == '"' ? "\\\"" : "\""); break;
            case '\\': emit("\\\\"); break;
            case '\n': emit("\\n"); break;
            case '\r': emit("\\r"); break;
            case '\t': emit("\\t"); break;
            case 0: emit("\\0"); break;
            default:
                if (cp < 0x20 || cp == 0x7f) {  // as Rust's escape_debug: \u{3}, \u{1b}
                    static const char kHex[] = "0123456789abcdef";
                    const char esc[] = {'\\', 'u', '{', kHex[(cp >> 4) & 0xf], kHex[cp & 0xf], '}'};
                    const size_t skip = cp < 0x10 ? 1 : 0;  // one hex digit, not two
                    emit(esc, 3);
                    emit(esc + 3 + skip, sizeof esc - 3 - skip);
                } else {
                    std::string u;
                    append_utf8(cp, &u);
                    emit(u.data(), u.size());
                }
        }
    }

    const char* s_;
    size_t n_;
    size_t pos_ = 0;
    std::string out_;
    bool ok_ = true;
    bool limit_hit_ = false;  // failed on a limit, not on the input's form
    bool print_ = true;
    int depth_ = 0;
    uint32_t steps_ = 0;
    uint64_t bound_ = 0;  // lifetimes bound by the enclosing binders
};

}  // namespace

bool rust_v0_demangle(const char* mangled, std::string* out) {
    if (mangled == nullptr) return false;
    const char* s = mangled;
    if (s[0] == '_' && s[1] == '_' && s[2] == 'R') s += 3;  // Mach-O adds an underscore
    else if (s[0] == '_' && s[1] == 'R') s += 2;
    else return false;
    const size_t n = strnlen(s, kRustMaxSymbolBytes + 1);
    if (n == 0) return false;
    if (n > kRustMaxSymbolBytes) {
        g_over_limit.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    V0Printer printer(s, n);
    if (printer.run(out)) return true;
    if (printer.limit_hit()) g_over_limit.fetch_add(1, std::memory_order_relaxed);
    return false;
}

namespace {

bool is_lower_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }

// rustc's legacy hash element: "h" and 16 lowercase hex digits.
bool is_legacy_hash(const char* p, size_t n) {
    if (n != 17 || p[0] != 'h') return false;
    for (size_t i = 1; i < n; ++i)
        if (!is_lower_hex(p[i])) return false;
    return true;
}

// One path element of a legacy symbol with rustc's escapes undone: "$LT$" is '<', "$u7b$" is
// '{', ".." is "::" (a path inside the element, as in `<a::B as c::D>`). An escape it does not
// know ends the reading: the rest of the element is copied as it is.
void append_legacy_element(const char* p, size_t n, std::string* out) {
    size_t i = 0;
    if (n >= 2 && p[0] == '_' && p[1] == '$') i = 1;  // a leading '$' is written "_$"
    while (i < n) {
        if (p[i] == '.') {
            const bool pair = i + 1 < n && p[i + 1] == '.';
            out->append(pair ? "::" : ".");
            i += pair ? 2 : 1;
            continue;
        }
        if (p[i] != '$') {
            size_t j = i;
            while (j < n && p[j] != '$' && p[j] != '.') ++j;
            out->append(p + i, j - i);
            i = j;
            continue;
        }
        const char* end = static_cast<const char*>(std::memchr(p + i + 1, '$', n - i - 1));
        if (end == nullptr) break;
        const std::string esc(p + i + 1, static_cast<size_t>(end - (p + i + 1)));
        static const struct { const char* esc; char c; } kEscapes[] = {
            {"SP", '@'}, {"BP", '*'}, {"RF", '&'}, {"LT", '<'}, {"GT", '>'}, {"LP", '('}, {"RP", ')'}, {"C", ','},
        };
        bool known = false;
        for (const auto& e : kEscapes) {
            if (esc == e.esc) {
                out->push_back(e.c);
                known = true;
                break;
            }
        }
        if (!known && esc.size() >= 2 && esc.size() <= 7 && esc[0] == 'u' &&
            std::all_of(esc.begin() + 1, esc.end(), is_lower_hex)) {
            const uint64_t cp = std::strtoull(esc.c_str() + 1, nullptr, 16);
            if (valid_scalar(cp) && cp >= 0x20 && !(cp >= 0x7f && cp < 0xa0)) {  // no control codes
                append_utf8(static_cast<uint32_t>(cp), out);
                known = true;
            }
        }
        if (!known) break;
        i = static_cast<size_t>(end - p) + 1;
    }
    out->append(p + i, n - i);
}

}  // namespace

bool rust_legacy_demangle(const char* mangled, std::string* out) {
    if (mangled == nullptr) return false;
    const char* s = mangled;
    if (std::strncmp(s, "__ZN", 4) == 0) s += 4;  // Mach-O adds an underscore
    else if (std::strncmp(s, "_ZN", 3) == 0) s += 3;
    else return false;
    const size_t n = strnlen(s, kRustMaxSymbolBytes + 1);
    if (n > kRustMaxSymbolBytes) return false;  // C++ reads it, as before
    std::vector<std::pair<size_t, size_t>> elements;  // offset, length
    size_t i = 0;
    while (i < n && s[i] != 'E') {
        if (!is_digit(s[i]) || s[i] == '0') return false;
        size_t len = 0;
        while (i < n && is_digit(s[i])) {
            len = len * 10 + static_cast<size_t>(s[i++] - '0');
            if (len > n) return false;
        }
        if (len > n - i) return false;
        for (size_t k = i; k < i + len; ++k)
            if (static_cast<unsigned char>(s[k]) >= 0x80) return false;  // rustc writes ASCII
        elements.emplace_back(i, len);
        i += len;
    }
    if (i >= n || elements.size() < 2) return false;  // no 'E', or no path before the hash
    ++i;
    // Only rustc ends a path with its hash: a C++ name (parameters after 'E', no hash) is not ours.
    const auto& last = elements.back();
    if (!is_legacy_hash(s + last.first, last.second)) return false;
    const char* suffix = s + i;
    static const char kLlvm[] = ".llvm.";
    if (!symbol_like_suffix(suffix, n - i)) return false;
    std::string text;
    for (size_t e = 0; e < elements.size(); ++e) {
        if (e > 0) text.append("::");
        append_legacy_element(s + elements[e].first, elements[e].second, &text);
    }
    if (std::strncmp(suffix, kLlvm, sizeof kLlvm - 1) != 0) text.append(suffix);
    if (text.size() > kRustMaxOutputBytes) return false;
    *out = std::move(text);
    return true;
}

uint64_t rust_names_over_limit() { return g_over_limit.load(std::memory_order_relaxed); }

}  // namespace spprof
