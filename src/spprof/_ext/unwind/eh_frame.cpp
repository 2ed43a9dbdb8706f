// unwind/eh_frame.cpp: CIE/FDE parsing, the CFA interpreter and .eh_frame_hdr lookup
// (see eh_frame.h). SIGNAL-SAFE and NO-HEAP throughout.
#include "unwind/eh_frame.h"

#include <cstring>

#include "capture/reader.h"  // SPPROF_NO_SANITIZE_ADDRESS

namespace spprof {

namespace {

// A bounds-checked cursor over [p, end). A failed read sets ok = false, returns 0 and leaves
// the cursor where it was; callers test ok once after a group of reads.
struct Reader {
    const uint8_t* p;
    const uint8_t* end;
    bool ok = true;

    Reader(const uint8_t* begin, const uint8_t* stop) : p(begin), end(stop) {}

    size_t left() const { return p <= end ? static_cast<size_t>(end - p) : 0; }

    template <typename T>
    T fixed() {
        T v{};
        if (!ok || left() < sizeof(T)) {
            ok = false;
            return v;
        }
        std::memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        return v;
    }
    uint8_t u8() { return fixed<uint8_t>(); }

    // LEB128, at most 10 bytes (64 bits).
    uint64_t uleb() {
        uint64_t v = 0;
        for (unsigned i = 0; i < 10; ++i) {
            if (!ok || left() < 1) break;
            const uint8_t b = *p++;
            v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
            if ((b & 0x80) == 0) return v;
        }
        ok = false;
        return 0;
    }
    int64_t sleb() {
        uint64_t v = 0;
        for (unsigned i = 0; i < 10; ++i) {
            if (!ok || left() < 1) break;
            const uint8_t b = *p++;
            v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
            if ((b & 0x80) == 0) {
                const unsigned shift = 7 * (i + 1);
                if (shift < 64 && (b & 0x40) != 0) v |= ~uint64_t{0} << shift;
                return static_cast<int64_t>(v);
            }
        }
        ok = false;
        return 0;
    }
    bool skip(uint64_t n) {
        if (!ok || n > left()) {
            ok = false;
            return false;
        }
        p += n;
        return true;
    }
};

// The end of the record whose length field is at `rec`, and where its body starts.
// Handles the 64-bit extended length (0xffffffff then 8 bytes).
CfiResult record_bounds(const uint8_t* rec, const ByteRange& range, const uint8_t** body,
                        const uint8_t** rec_end, bool* is64) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(rec);
    if (!range.contains(a, 4)) return CfiResult::kOutOfRange;
    Reader r(rec, reinterpret_cast<const uint8_t*>(range.hi));
    uint64_t len = r.fixed<uint32_t>();
    *is64 = false;
    if (len == 0xffffffffu) {
        len = r.fixed<uint64_t>();
        *is64 = true;
    }
    if (!r.ok) return CfiResult::kOutOfRange;
    if (len == 0) return CfiResult::kMalformed;  // terminator, not a record
    if (len > r.left()) return CfiResult::kOutOfRange;
    *body = r.p;
    *rec_end = r.p + len;
    return CfiResult::kOk;
}

}  // namespace

CfiResult read_encoded_pointer(const uint8_t** p, const uint8_t* end, uint8_t encoding,
                               const PointerBases& bases, uint64_t* out) {
    if (encoding == dw_eh_pe::kOmit) return CfiResult::kMalformed;
    if ((encoding & dw_eh_pe::kIndirect) != 0) return CfiResult::kUnsupported;
    const uintptr_t field = reinterpret_cast<uintptr_t>(*p);
    Reader r(*p, end);
    uint64_t v = 0;
    switch (encoding & 0x0f) {
        case dw_eh_pe::kAbsPtr: v = r.fixed<uint64_t>(); break;
        case dw_eh_pe::kULeb128: v = r.uleb(); break;
        case dw_eh_pe::kUData2: v = r.fixed<uint16_t>(); break;
        case dw_eh_pe::kUData4: v = r.fixed<uint32_t>(); break;
        case dw_eh_pe::kUData8: v = r.fixed<uint64_t>(); break;
        case dw_eh_pe::kSLeb128: v = static_cast<uint64_t>(r.sleb()); break;
        case dw_eh_pe::kSData2: v = static_cast<uint64_t>(int64_t{r.fixed<int16_t>()}); break;
        case dw_eh_pe::kSData4: v = static_cast<uint64_t>(int64_t{r.fixed<int32_t>()}); break;
        case dw_eh_pe::kSData8: v = static_cast<uint64_t>(r.fixed<int64_t>()); break;
        default: return CfiResult::kUnsupported;
    }
    if (!r.ok) return CfiResult::kOutOfRange;
    switch (encoding & 0x70) {
        case 0x00: break;
        case dw_eh_pe::kPcRel: v += field; break;
        case dw_eh_pe::kDataRel:
            if (bases.data == 0) return CfiResult::kUnsupported;
            v += bases.data;
            break;
        default: return CfiResult::kUnsupported;  // textrel, funcrel, aligned: not used on ELF
    }
    *p = r.p;
    *out = v;
    return CfiResult::kOk;
}

// Byte size of an encoded pointer's fixed-size format, 0 for LEB128 formats, -1 unknown.
static int encoded_size(uint8_t encoding) {
    switch (encoding & 0x0f) {
        case dw_eh_pe::kAbsPtr: return 8;
        case dw_eh_pe::kUData2: case dw_eh_pe::kSData2: return 2;
        case dw_eh_pe::kUData4: case dw_eh_pe::kSData4: return 4;
        case dw_eh_pe::kUData8: case dw_eh_pe::kSData8: return 8;
        case dw_eh_pe::kULeb128: case dw_eh_pe::kSLeb128: return 0;
        default: return -1;
    }
}

CfiResult parse_cie(const uint8_t* cie, const ByteRange& range, Cie* out) {
    const uint8_t* body = nullptr;
    const uint8_t* rec_end = nullptr;
    bool is64 = false;
    CfiResult res = record_bounds(cie, range, &body, &rec_end, &is64);
    if (res != CfiResult::kOk) return res;
    Reader r(body, rec_end);
    const uint64_t id = is64 ? r.fixed<uint64_t>() : r.fixed<uint32_t>();
    if (!r.ok) return CfiResult::kOutOfRange;
    if (id != 0) return CfiResult::kMalformed;  // .eh_frame CIEs have id 0
    const uint8_t version = r.u8();
    if (!r.ok) return CfiResult::kOutOfRange;
    if (version != 1 && version != 3 && version != 4) return CfiResult::kUnsupported;

    // Augmentation string: bounded by the record.
    const uint8_t* aug = r.p;
    size_t aug_len = 0;
    while (aug_len < r.left() && aug[aug_len] != 0) ++aug_len;
    if (aug_len == r.left()) return CfiResult::kOutOfRange;
    r.p += aug_len + 1;
    if (aug_len > 0 && aug[0] != 'z') {
        // Only "" or "z..." augmentations are understood ("eh" is pre-2000 gcc).
        return CfiResult::kUnsupported;
    }
    if (version == 4) {
        const uint8_t addr_size = r.u8();
        const uint8_t seg_size = r.u8();
        if (!r.ok) return CfiResult::kOutOfRange;
        if (addr_size != 8 || seg_size != 0) return CfiResult::kUnsupported;
    }
    Cie c;
    c.code_align = r.uleb();
    c.data_align = r.sleb();
    c.ra_column = version == 1 ? r.u8() : static_cast<uint32_t>(r.uleb());
    if (!r.ok) return CfiResult::kOutOfRange;
    if (c.code_align == 0) return CfiResult::kMalformed;

    const uint8_t* insns = nullptr;
    if (aug_len > 0) {
        c.has_z = true;
        const uint64_t zlen = r.uleb();
        if (!r.ok) return CfiResult::kOutOfRange;
        if (zlen > r.left()) return CfiResult::kOutOfRange;
        const uint8_t* zend = r.p + zlen;
        insns = zend;
        Reader z(r.p, zend);
        for (size_t i = 1; i < aug_len; ++i) {
            const char ch = static_cast<char>(aug[i]);
            if (ch == 'R') {
                c.fde_encoding = z.u8();
            } else if (ch == 'L') {
                z.u8();  // LSDA encoding: the FDE's augmentation data is skipped by its length
            } else if (ch == 'P') {
                const uint8_t enc = z.u8();
                const int size = encoded_size(enc);
                if (size < 0) return CfiResult::kUnsupported;
                if (size == 0) {
                    z.uleb();
                } else {
                    z.skip(static_cast<uint64_t>(size));
                }
            } else if (ch == 'S') {
                c.signal_frame = true;
            } else if (ch == 'B' || ch == 'G') {
                // aarch64 BTI / MTE markers: no data, nothing for unwinding.
            } else {
                break;  // unknown: the rest of the data is skipped by the 'z' length
            }
            if (!z.ok) return CfiResult::kOutOfRange;
        }
    } else {
        insns = r.p;
    }
    c.insns = insns;
    c.insns_end = rec_end;
    *out = c;
    return CfiResult::kOk;
}

CfiResult parse_fde(const uint8_t* fde, const ByteRange& range, const PointerBases& bases,
                    Fde* out) {
    const uint8_t* body = nullptr;
    const uint8_t* rec_end = nullptr;
    bool is64 = false;
    CfiResult res = record_bounds(fde, range, &body, &rec_end, &is64);
    if (res != CfiResult::kOk) return res;
    Reader r(body, rec_end);
    const uintptr_t id_field = reinterpret_cast<uintptr_t>(r.p);
    const uint64_t cie_delta = is64 ? r.fixed<uint64_t>() : r.fixed<uint32_t>();
    if (!r.ok) return CfiResult::kOutOfRange;
    if (cie_delta == 0) return CfiResult::kMalformed;  // this is a CIE, not an FDE
    if (cie_delta > id_field - range.lo) return CfiResult::kOutOfRange;
    const uint8_t* cie = reinterpret_cast<const uint8_t*>(id_field - cie_delta);

    Fde f;
    res = parse_cie(cie, range, &f.cie);
    if (res != CfiResult::kOk) return res;
    const uint8_t* p = r.p;
    uint64_t begin = 0, len = 0;
    res = read_encoded_pointer(&p, rec_end, f.cie.fde_encoding, bases, &begin);
    if (res != CfiResult::kOk) return res;
    // The range is a length: the format of the encoding without its base.
    res = read_encoded_pointer(&p, rec_end, f.cie.fde_encoding & 0x0f, bases, &len);
    if (res != CfiResult::kOk) return res;
    r.p = p;
    if (f.cie.has_z) {
        const uint64_t zlen = r.uleb();
        r.skip(zlen);
        if (!r.ok) return CfiResult::kOutOfRange;
    }
    if (begin + len < begin) return CfiResult::kMalformed;
    f.pc_begin = begin;
    f.pc_end = begin + len;
    f.insns = r.p;
    f.insns_end = rec_end;
    *out = f;
    return CfiResult::kOk;
}

namespace {

// DW_CFA opcodes (DWARF 5 section 6.4.2 plus the GNU/aarch64 extensions gcc emits).
enum : uint8_t {
    kAdvanceLoc = 0x40,  // high two bits
    kOffset = 0x80,
    kRestore = 0xc0,
    kNop = 0x00,
    kSetLoc = 0x01,
    kAdvanceLoc1 = 0x02,
    kAdvanceLoc2 = 0x03,
    kAdvanceLoc4 = 0x04,
    kOffsetExtended = 0x05,
    kRestoreExtended = 0x06,
    kUndefined = 0x07,
    kSameValue = 0x08,
    kRegister = 0x09,
    kRememberState = 0x0a,
    kRestoreState = 0x0b,
    kDefCfa = 0x0c,
    kDefCfaRegister = 0x0d,
    kDefCfaOffset = 0x0e,
    kDefCfaExpression = 0x0f,
    kExpression = 0x10,
    kOffsetExtendedSf = 0x11,
    kDefCfaSf = 0x12,
    kDefCfaOffsetSf = 0x13,
    kValOffset = 0x14,
    kValOffsetSf = 0x15,
    kValExpression = 0x16,
    kGnuWindowSave = 0x2d,  // aarch64: DW_CFA_AARCH64_negate_ra_state (PAC); no operands
    kGnuArgsSize = 0x2e,
    kGnuNegativeOffsetExtended = 0x2f,
};

struct Interp {
    const Fde& fde;
    uint64_t target;
    CfiRow* row;
    const CfiRow* initial;  // null while the CIE's instructions run
    CfiRow stack[kCfiStateStack];
    uint32_t depth = 0;
    uint32_t steps = 0;

    Interp(const Fde& f, uint64_t t, CfiRow* r) : fde(f), target(t), row(r), initial(nullptr) {}

    bool set_rule(uint64_t reg, RuleKind kind, int64_t offset, uint64_t other = 0) {
        if (reg >= kCfiRegs) return true;  // untracked column: dropped (see kCfiRegs)
        if (offset < INT32_MIN || offset > INT32_MAX) return false;
        RegRule& rule = row->regs[reg];
        rule.kind = kind;
        rule.offset = static_cast<int32_t>(offset);
        if (kind == RuleKind::kExpression || kind == RuleKind::kValExpression) {
            rule.reg = static_cast<uint8_t>(other);  // the block's length (<= kMaxRuleExpression)
            return true;
        }
        rule.reg = static_cast<uint8_t>(other < kCfiRegs ? other : 0);
        if (kind == RuleKind::kRegister && other >= kCfiRegs) rule.kind = RuleKind::kUndefined;
        return true;
    }

    // Runs [p, end) starting at `loc`. Returns kOk when the program ended or the location
    // passed the target; *done = true in the latter case.
    CfiResult run(const uint8_t* p, const uint8_t* end, uint64_t loc, bool* done) {
        *done = false;
        Reader r(p, end);
        const uint64_t caf = fde.cie.code_align;
        const int64_t daf = fde.cie.data_align;
        while (r.left() > 0) {
            if (++steps > kCfiMaxInstructions) return CfiResult::kMalformed;
            const uint8_t op = r.u8();
            const uint8_t hi = op & 0xc0;
            const uint8_t lo = op & 0x3f;
            uint64_t delta = 0;
            bool advance = false;
            if (hi == kAdvanceLoc) {
                delta = lo;
                advance = true;
            } else if (hi == kOffset) {
                const uint64_t off = r.uleb();
                if (!set_rule(lo, RuleKind::kOffset, static_cast<int64_t>(off) * daf))
                    return CfiResult::kMalformed;
            } else if (hi == kRestore) {
                if (initial == nullptr) return CfiResult::kMalformed;  // not allowed in a CIE
                if (lo < kCfiRegs) row->regs[lo] = initial->regs[lo];
            } else {
                switch (op) {
                    case kNop: break;
                    case kSetLoc: {
                        const uint8_t* q = r.p;
                        uint64_t to = 0;
                        const CfiResult res =
                            read_encoded_pointer(&q, r.end, fde.cie.fde_encoding, PointerBases{}, &to);
                        if (res != CfiResult::kOk) return res;
                        r.p = q;
                        if (to < loc) return CfiResult::kMalformed;
                        if (to > target) {
                            *done = true;
                            return CfiResult::kOk;
                        }
                        loc = to;
                        break;
                    }
                    case kAdvanceLoc1: delta = r.u8(); advance = true; break;
                    case kAdvanceLoc2: delta = r.fixed<uint16_t>(); advance = true; break;
                    case kAdvanceLoc4: delta = r.fixed<uint32_t>(); advance = true; break;
                    case kOffsetExtended: {
                        const uint64_t reg = r.uleb();
                        const uint64_t off = r.uleb();
                        if (!set_rule(reg, RuleKind::kOffset, static_cast<int64_t>(off) * daf))
                            return CfiResult::kMalformed;
                        break;
                    }
                    case kOffsetExtendedSf: {
                        const uint64_t reg = r.uleb();
                        const int64_t off = r.sleb();
                        if (!set_rule(reg, RuleKind::kOffset, off * daf)) return CfiResult::kMalformed;
                        break;
                    }
                    case kGnuNegativeOffsetExtended: {
                        const uint64_t reg = r.uleb();
                        const uint64_t off = r.uleb();
                        if (!set_rule(reg, RuleKind::kOffset, -static_cast<int64_t>(off) * daf))
                            return CfiResult::kMalformed;
                        break;
                    }
                    case kValOffset: {
                        const uint64_t reg = r.uleb();
                        const uint64_t off = r.uleb();
                        if (!set_rule(reg, RuleKind::kValOffset, static_cast<int64_t>(off) * daf))
                            return CfiResult::kMalformed;
                        break;
                    }
                    case kValOffsetSf: {
                        const uint64_t reg = r.uleb();
                        const int64_t off = r.sleb();
                        if (!set_rule(reg, RuleKind::kValOffset, off * daf)) return CfiResult::kMalformed;
                        break;
                    }
                    case kRestoreExtended: {
                        const uint64_t reg = r.uleb();
                        if (initial == nullptr) return CfiResult::kMalformed;
                        if (reg < kCfiRegs) row->regs[reg] = initial->regs[reg];
                        break;
                    }
                    case kUndefined: set_rule(r.uleb(), RuleKind::kUndefined, 0); break;
                    case kSameValue: set_rule(r.uleb(), RuleKind::kSameValue, 0); break;
                    case kRegister: {
                        const uint64_t reg = r.uleb();
                        const uint64_t other = r.uleb();
                        set_rule(reg, RuleKind::kRegister, 0, other);
                        break;
                    }
                    case kRememberState:
                        if (depth == kCfiStateStack) return CfiResult::kUnsupported;
                        stack[depth++] = *row;
                        break;
                    case kRestoreState: {
                        if (depth == 0) return CfiResult::kMalformed;
                        // The CFA rule is part of the remembered state (DWARF 5 6.4.2.4).
                        *row = stack[--depth];
                        break;
                    }
                    case kDefCfa: {
                        const uint64_t reg = r.uleb();
                        const uint64_t off = r.uleb();
                        row->cfa = CfaRule{};
                        row->cfa.reg = static_cast<uint32_t>(reg);
                        row->cfa.offset = static_cast<int64_t>(off);
                        row->cfa.defined = true;
                        break;
                    }
                    case kDefCfaSf: {
                        const uint64_t reg = r.uleb();
                        const int64_t off = r.sleb();
                        row->cfa = CfaRule{};
                        row->cfa.reg = static_cast<uint32_t>(reg);
                        row->cfa.offset = off * daf;
                        row->cfa.defined = true;
                        break;
                    }
                    case kDefCfaRegister:
                        row->cfa.reg = static_cast<uint32_t>(r.uleb());
                        row->cfa.expr = nullptr;
                        row->cfa.expr_len = 0;
                        row->cfa.defined = true;
                        break;
                    case kDefCfaOffset:
                        row->cfa.offset = static_cast<int64_t>(r.uleb());
                        break;
                    case kDefCfaOffsetSf:
                        row->cfa.offset = r.sleb() * daf;
                        break;
                    case kDefCfaExpression: {
                        const uint64_t len = r.uleb();
                        const uint8_t* e = r.p;
                        if (!r.skip(len)) return CfiResult::kOutOfRange;
                        row->cfa = CfaRule{};
                        row->cfa.expr = e;
                        row->cfa.expr_len = static_cast<uint32_t>(len);
                        row->cfa.defined = true;
                        break;
                    }
                    case kExpression:
                    case kValExpression: {
                        const uint64_t reg = r.uleb();
                        const uint64_t len = r.uleb();
                        const uint8_t* e = r.p;
                        if (!r.skip(len)) return CfiResult::kOutOfRange;
                        // Kept as (distance from the FDE's instructions, length): both lie in
                        // .eh_frame, and a row stays small on the signal stack. A block past
                        // kMaxRuleExpression bytes keeps length 0: the register is unknown.
                        const int64_t at = e - fde.insns;
                        const bool kept = len > 0 && len <= kMaxRuleExpression;
                        if (!set_rule(reg, op == kExpression ? RuleKind::kExpression : RuleKind::kValExpression,
                                      kept ? at : 0, kept ? len : 0))
                            return CfiResult::kMalformed;
                        break;
                    }
                    case kGnuWindowSave: break;  // aarch64 PAC state: return addresses are stripped
                    case kGnuArgsSize: row->args_size = r.uleb(); break;
                    default: return CfiResult::kUnsupported;
                }
            }
            if (!r.ok) return CfiResult::kOutOfRange;
            if (advance) {
                const uint64_t next = loc + delta * caf;
                if (next < loc) return CfiResult::kMalformed;
                if (next > target) {
                    *done = true;
                    return CfiResult::kOk;
                }
                loc = next;
            }
        }
        return CfiResult::kOk;
    }
};

}  // namespace

CfiResult run_cfi(const Fde& fde, uint64_t pc, CfiRow* row) {
    if (pc < fde.pc_begin || pc >= fde.pc_end) return CfiResult::kNotFound;
    *row = CfiRow{};
    Interp in(fde, pc, row);
    bool done = false;
    // The CIE's initial instructions describe the entry row; advances there are not expected,
    // so its target is "never stop".
    in.target = UINT64_MAX;
    CfiResult res = in.run(fde.cie.insns, fde.cie.insns_end, fde.pc_begin, &done);
    if (res != CfiResult::kOk) return res;
    if (in.depth != 0) return CfiResult::kMalformed;
    CfiRow initial = *row;
    in.initial = &initial;
    in.target = pc;
    res = in.run(fde.insns, fde.insns_end, fde.pc_begin, &done);
    if (res != CfiResult::kOk) return res;
    if (!row->cfa.defined) return CfiResult::kMalformed;
    return CfiResult::kOk;
}

SPPROF_NO_SANITIZE_ADDRESS bool read_stack_window(const StackWindow& w, uint64_t addr, uint32_t size,
                                                  uint64_t* out) {
    if (size == 0 || size > 8 || w.hi <= w.lo || addr < w.lo || addr > w.hi || size > w.hi - addr) return false;
    uint64_t v = 0;
    std::memcpy(&v, reinterpret_cast<const void*>(static_cast<uintptr_t>(addr)), size);
    *out = v;
    return true;
}

CfiResult eval_cfa_expression(const uint8_t* expr, uint32_t len, const uint64_t* regs,
                              uint64_t valid, uint64_t* out) {
    return eval_cfi_expression(expr, len, regs, valid, StackWindow{}, nullptr, out);
}

CfiResult eval_cfi_expression(const uint8_t* expr, uint32_t len, const uint64_t* regs, uint64_t valid,
                              const StackWindow& stack, const uint64_t* push_first, uint64_t* out) {
    constexpr uint32_t kStack = 16;
    uint64_t st[kStack];
    uint32_t n = 0;
    if (push_first != nullptr) st[n++] = *push_first;  // DW_CFA_expression: the CFA first
    Reader r(expr, expr + len);
    uint32_t steps = 0;
#define SPPROF_PUSH(v)                                   \
    do {                                                 \
        if (n == kStack) return CfiResult::kUnsupported; \
        const uint64_t pushed_ = (v);                    \
        st[n++] = pushed_;                               \
    } while (0)
#define SPPROF_NEED(k)                                    \
    do {                                                  \
        if (n < (k)) return CfiResult::kMalformed;        \
    } while (0)
    while (r.left() > 0) {
        if (++steps > 256) return CfiResult::kUnsupported;
        const uint8_t op = r.u8();
        if (op >= 0x30 && op <= 0x4f) {  // DW_OP_lit0..31
            SPPROF_PUSH(uint64_t{op} - 0x30u);
            continue;
        }
        if ((op >= 0x70 && op <= 0x8f) || op == 0x92) {  // DW_OP_breg0..31 sleb, bregx uleb sleb
            const uint64_t reg = op == 0x92 ? r.uleb() : uint64_t{op} - 0x70u;
            const int64_t off = r.sleb();
            if (!r.ok) return CfiResult::kOutOfRange;
            if (reg >= kCfiRegs || ((valid >> reg) & 1) == 0) return CfiResult::kUnsupported;
            SPPROF_PUSH(regs[reg] + static_cast<uint64_t>(off));
            continue;
        }
        switch (op) {
            case 0x06:    // deref: a word of the thread's stack (gcc's realigned frames, DRAP)
            case 0x94: {  // deref_size n
                const uint32_t size = op == 0x06 ? 8u : r.u8();
                if (!r.ok) return CfiResult::kOutOfRange;
                SPPROF_NEED(1);
                if (!read_stack_window(stack, st[n - 1], size, &st[n - 1])) return CfiResult::kUnsupported;
                break;
            }
            case 0x15: {  // pick i
                const uint8_t i = r.u8();
                if (!r.ok) return CfiResult::kOutOfRange;
                SPPROF_NEED(uint32_t{i} + 1);
                SPPROF_PUSH(st[n - 1 - i]);
                break;
            }
            case 0x17: {  // rot: the top three, top goes third
                SPPROF_NEED(3);
                const uint64_t t = st[n - 1];
                st[n - 1] = st[n - 2];
                st[n - 2] = st[n - 3];
                st[n - 3] = t;
                break;
            }
            case 0x19: SPPROF_NEED(1); st[n - 1] = static_cast<int64_t>(st[n - 1]) < 0 ? 0 - st[n - 1] : st[n - 1]; break;  // abs
            case 0x1b:    // div (signed)
            case 0x1d: {  // mod
                SPPROF_NEED(2);
                const uint64_t b = st[--n];
                const uint64_t a = st[n - 1];
                if (b == 0) return CfiResult::kMalformed;
                if (op == 0x1d) {
                    st[n - 1] = a % b;
                } else {
                    const int64_t sa = static_cast<int64_t>(a), sb = static_cast<int64_t>(b);
                    st[n - 1] = (sa == INT64_MIN && sb == -1) ? a : static_cast<uint64_t>(sa / sb);
                }
                break;
            }
            case 0x08: SPPROF_PUSH(r.u8()); break;                                         // const1u
            case 0x09: SPPROF_PUSH(static_cast<uint64_t>(int64_t{r.fixed<int8_t>()})); break;   // const1s
            case 0x0a: SPPROF_PUSH(r.fixed<uint16_t>()); break;                            // const2u
            case 0x0b: SPPROF_PUSH(static_cast<uint64_t>(int64_t{r.fixed<int16_t>()})); break;  // const2s
            case 0x0c: SPPROF_PUSH(r.fixed<uint32_t>()); break;                            // const4u
            case 0x0d: SPPROF_PUSH(static_cast<uint64_t>(int64_t{r.fixed<int32_t>()})); break;  // const4s
            case 0x0e: SPPROF_PUSH(r.fixed<uint64_t>()); break;                            // const8u
            case 0x0f: SPPROF_PUSH(static_cast<uint64_t>(r.fixed<int64_t>())); break;      // const8s
            case 0x10: SPPROF_PUSH(r.uleb()); break;                                       // constu
            case 0x11: SPPROF_PUSH(static_cast<uint64_t>(r.sleb())); break;                // consts
            case 0x12: SPPROF_NEED(1); SPPROF_PUSH(st[n - 1]); break;                      // dup
            case 0x13: SPPROF_NEED(1); --n; break;                                         // drop
            case 0x14: SPPROF_NEED(2); SPPROF_PUSH(st[n - 2]); break;                      // over
            case 0x16: {                                                                   // swap
                SPPROF_NEED(2);
                const uint64_t t = st[n - 1];
                st[n - 1] = st[n - 2];
                st[n - 2] = t;
                break;
            }
            case 0x1f: SPPROF_NEED(1); st[n - 1] = 0 - st[n - 1]; break;  // neg
            case 0x20: SPPROF_NEED(1); st[n - 1] = ~st[n - 1]; break;     // not
            case 0x23: SPPROF_NEED(1); st[n - 1] += r.uleb(); break;      // plus_uconst
            case 0x1a: case 0x1c: case 0x1e: case 0x21: case 0x22: case 0x24: case 0x25:
            case 0x26: case 0x27: case 0x29: case 0x2a: case 0x2b: case 0x2c: case 0x2d:
            case 0x2e: {
                SPPROF_NEED(2);
                const uint64_t b = st[--n];
                const uint64_t a = st[n - 1];
                const int64_t sa = static_cast<int64_t>(a), sb = static_cast<int64_t>(b);
                uint64_t v = 0;
                switch (op) {
                    case 0x1a: v = a & b; break;
                    case 0x1c: v = a - b; break;
                    case 0x1e: v = a * b; break;
                    case 0x21: v = a | b; break;
                    case 0x22: v = a + b; break;
                    case 0x24: v = b >= 64 ? 0 : a << b; break;
                    case 0x25: v = b >= 64 ? 0 : a >> b; break;
                    case 0x26: v = static_cast<uint64_t>(b >= 64 ? (sa < 0 ? -1 : 0) : sa >> b); break;
                    case 0x27: v = a ^ b; break;
                    case 0x29: v = sa == sb; break;
                    case 0x2a: v = sa >= sb; break;
                    case 0x2b: v = sa > sb; break;
                    case 0x2c: v = sa <= sb; break;
                    case 0x2d: v = sa < sb; break;
                    case 0x2e: v = sa != sb; break;
                }
                st[n - 1] = v;
                break;
            }
            case 0x96: break;  // nop
            default: return CfiResult::kUnsupported;  // regx, skip, bra, calls, TLS...
        }
        if (!r.ok) return CfiResult::kOutOfRange;
    }
#undef SPPROF_PUSH
#undef SPPROF_NEED
    if (n == 0) return CfiResult::kMalformed;
    *out = st[n - 1];
    return CfiResult::kOk;
}

CfiResult parse_eh_frame_hdr(const uint8_t* hdr, const ByteRange& range, EhFrameHdr* out) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(hdr);
    if (!range.contains(a, 4)) return CfiResult::kOutOfRange;
    Reader r(hdr, reinterpret_cast<const uint8_t*>(range.hi));
    const uint8_t version = r.u8();
    const uint8_t frame_enc = r.u8();
    const uint8_t count_enc = r.u8();
    const uint8_t table_enc = r.u8();
    if (!r.ok) return CfiResult::kOutOfRange;
    if (version != 1) return CfiResult::kUnsupported;
    PointerBases bases;
    bases.data = a;
    EhFrameHdr h;
    h.hdr = a;
    const uint8_t* p = r.p;
    uint64_t v = 0;
    CfiResult res = read_encoded_pointer(&p, r.end, frame_enc, bases, &v);
    if (res != CfiResult::kOk) return res;
    h.eh_frame = static_cast<uintptr_t>(v);
    if (count_enc == dw_eh_pe::kOmit || table_enc != (dw_eh_pe::kDataRel | dw_eh_pe::kSData4))
        return CfiResult::kUnsupported;
    res = read_encoded_pointer(&p, r.end, count_enc, bases, &v);
    if (res != CfiResult::kOk) return res;
    if (v > UINT32_MAX) return CfiResult::kMalformed;
    const uintptr_t table = reinterpret_cast<uintptr_t>(p);
    if (!range.contains(table, static_cast<size_t>(v) * 8)) return CfiResult::kOutOfRange;
    h.table = p;
    h.fde_count = static_cast<uint32_t>(v);
    *out = h;
    return CfiResult::kOk;
}

CfiResult find_fde(const EhFrameHdr& hdr, const ByteRange& cfi_range, uint64_t pc, Fde* out) {
    if (hdr.table == nullptr || hdr.fde_count == 0) return CfiResult::kNotFound;
    const int64_t rel = static_cast<int64_t>(pc - hdr.hdr);
    // Last entry whose initial location is <= pc; the table is sorted (the linker sorts it).
    uint32_t lo = 0, hi = hdr.fde_count;  // search in [lo, hi)
    while (hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        int32_t loc = 0;
        std::memcpy(&loc, hdr.table + static_cast<size_t>(mid) * 8, 4);
        if (int64_t{loc} <= rel) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    int32_t entry[2];
    std::memcpy(entry, hdr.table + static_cast<size_t>(lo) * 8, 8);
    if (int64_t{entry[0]} > rel) return CfiResult::kNotFound;
    const uint8_t* fde =
        reinterpret_cast<const uint8_t*>(hdr.hdr + static_cast<uintptr_t>(int64_t{entry[1]}));
    PointerBases bases;
    bases.data = hdr.hdr;
    Fde f;
    const CfiResult res = parse_fde(fde, cfi_range, bases, &f);
    if (res != CfiResult::kOk) return res;
    if (pc < f.pc_begin || pc >= f.pc_end) return CfiResult::kNotFound;
    *out = f;
    return CfiResult::kOk;
}

}  // namespace spprof
