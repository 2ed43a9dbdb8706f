// test_unwind_cfi.cpp: the CFI reader, the CFA interpreter and the unwinder over hand-built
// .eh_frame_hdr / .eh_frame bytes and a fake stack (unwind/eh_frame.h, unwind/unwinder.h).
//
// One static buffer holds a fake module: .eh_frame_hdr at +0, .eh_frame at +0x100, and a
// "text" range at +0x800 that is never executed, only named by FDEs and return addresses.
#include <cstring>
#include <memory>
#include <vector>

#include "harness.h"
#include "unwind/eh_frame.h"
#include "unwind/step_cache.h"
#include "unwind/unwinder.h"

using namespace spprof;

namespace {

// DWARF columns (x86_64 numbering; the interpreter itself is architecture-neutral).
constexpr uint8_t kRbx = 3, kRbp = 6, kRsp = 7, kRa = 16;

struct Emitter {
    uint8_t* base;
    size_t pos;
    void u8(uint8_t v) { base[pos++] = v; }
    void u32(uint32_t v) {
        std::memcpy(base + pos, &v, 4);
        pos += 4;
    }
    void u64(uint64_t v) {
        std::memcpy(base + pos, &v, 8);
        pos += 8;
    }
    void uleb(uint64_t v) {
        do {
            uint8_t b = v & 0x7f;
            v >>= 7;
            if (v != 0) b |= 0x80;
            u8(b);
        } while (v != 0);
    }
    void sleb(int64_t v) {
        bool more = true;
        while (more) {
            uint8_t b = v & 0x7f;
            v >>= 7;
            if ((v == 0 && (b & 0x40) == 0) || (v == -1 && (b & 0x40) != 0)) {
                more = false;
            } else {
                b |= 0x80;
            }
            u8(b);
        }
    }
    void bytes(const std::vector<uint8_t>& b) {
        for (uint8_t x : b) u8(x);
    }
    uintptr_t addr() const { return reinterpret_cast<uintptr_t>(base + pos); }
};

// CIE: version 1, "zR" with absptr FDE pointers, code align 1, data align -8, RA column 16,
// initial rules CFA = rsp + 8, RA at CFA - 8 (what gcc emits on x86_64). Returns its offset.
size_t emit_cie(Emitter& e, uint8_t fde_encoding = dw_eh_pe::kAbsPtr) {
    const size_t start = e.pos;
    e.u32(0);  // length, patched
    e.u32(0);  // CIE id
    e.u8(1);
    e.u8('z');
    e.u8('R');
    e.u8(0);
    e.uleb(1);
    e.sleb(-8);
    e.u8(kRa);
    e.uleb(1);
    e.u8(fde_encoding);
    e.bytes({0x0c, kRsp, 8, 0x80 | kRa, 1});
    while ((e.pos - start) % 8 != 0) e.u8(0);  // DW_CFA_nop padding
    const uint32_t len = static_cast<uint32_t>(e.pos - start - 4);
    std::memcpy(e.base + start, &len, 4);
    return start;
}

// FDE for [begin, begin + len) with `insns`, pointing at the CIE at `cie`. Absptr encoding.
size_t emit_fde(Emitter& e, size_t cie, uint64_t begin, uint64_t len, const std::vector<uint8_t>& insns) {
    const size_t start = e.pos;
    e.u32(0);
    const size_t id_field = e.pos;
    e.u32(static_cast<uint32_t>(id_field - cie));
    e.u64(begin);
    e.u64(len);
    e.uleb(0);  // augmentation length
    e.bytes(insns);
    while ((e.pos - start) % 8 != 0) e.u8(0);
    const uint32_t l = static_cast<uint32_t>(e.pos - start - 4);
    std::memcpy(e.base + start, &l, 4);
    return start;
}

alignas(16) uint8_t g_mod[0x1000];

struct FakeModule {
    uintptr_t text;  // fake functions f1 [0,0x40) f2 [0x40,0x80) f3 [0x80,0xc0); [0xc0,0x100) has no FDE
    UnwindSnapshot snap;
};

void index_fake_module(const size_t (&fdes)[3], FakeModule* fm);

// Build the fake module described at the top of this file (x86_64 CFI).
void build_fake_module(FakeModule* fm) {
    std::memset(g_mod, 0, sizeof g_mod);
    const uintptr_t base = reinterpret_cast<uintptr_t>(g_mod);
    fm->text = base + 0x800;
    Emitter eh{g_mod, 0x100};
    const size_t cie = emit_cie(eh);
    // f1: push rbp at +0, then CFA = rsp + 16, rbp at CFA - 16.
    const size_t f1 = emit_fde(eh, cie, fm->text, 0x40, {0x41, 0x0e, 16, 0x80 | kRbp, 2});
    // f2: after 4 bytes CFA = rsp + 32, rbx at CFA - 16.
    const size_t f2 = emit_fde(eh, cie, fm->text + 0x40, 0x40, {0x44, 0x0e, 32, 0x80 | kRbx, 2});
    // f3: push rbp; mov rbp, rsp: CFA = rbp + 16 from +4.
    const size_t f3 = emit_fde(eh, cie, fm->text + 0x80, 0x40,
                               {0x41, 0x0e, 16, 0x80 | kRbp, 2, 0x43, 0x0d, kRbp});
    eh.u32(0);  // .eh_frame terminator
    const size_t fdes[3] = {f1, f2, f3};
    index_fake_module(fdes, fm);
}

// The .eh_frame_hdr over three FDEs for text +0x00, +0x40, +0x80, and the snapshot naming it.
void index_fake_module(const size_t (&fdes)[3], FakeModule* fm) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(g_mod);
    Emitter hdr{g_mod, 0};
    hdr.u8(1);
    hdr.u8(dw_eh_pe::kPcRel | dw_eh_pe::kSData4);
    hdr.u8(dw_eh_pe::kUData4);
    hdr.u8(dw_eh_pe::kDataRel | dw_eh_pe::kSData4);
    hdr.u32(static_cast<uint32_t>(0x100 - hdr.pos));  // pcrel: from this field to .eh_frame
    hdr.u32(3);
    for (int i = 0; i < 3; ++i) {
        hdr.u32(static_cast<uint32_t>(0x800 + 0x40 * i));  // initial pc, relative to the header
        hdr.u32(static_cast<uint32_t>(fdes[i]));
    }
    UnwindModule m;
    m.bias = 0;
    m.cfi_range = ByteRange{base, base + sizeof g_mod};
    parse_eh_frame_hdr(g_mod, m.cfi_range, &m.eh);
    fm->snap.modules = {m};
    fm->snap.ranges = {ExecRange{fm->text, fm->text + 0x100, 0}};
}

}  // namespace

TEST(unwind_cfi_encoded_pointers) {
    alignas(8) uint8_t b[32] = {};
    PointerBases bases;
    bases.data = 0x10000;
    const uint8_t* p = b;
    uint64_t v = 0;
    int32_t rel = -16;
    std::memcpy(b, &rel, 4);
    CHECK(read_encoded_pointer(&p, b + 32, dw_eh_pe::kPcRel | dw_eh_pe::kSData4, bases, &v) == CfiResult::kOk);
    CHECK_EQ(v, reinterpret_cast<uintptr_t>(b) - 16);
    CHECK(p == b + 4);
    p = b;
    CHECK(read_encoded_pointer(&p, b + 32, dw_eh_pe::kDataRel | dw_eh_pe::kSData4, bases, &v) == CfiResult::kOk);
    CHECK_EQ(v, uint64_t{0x10000 - 16});
    // sleb128 -2 = 0x7e; uleb128 300 = 0xac 0x02.
    const uint8_t leb[3] = {0x7e, 0xac, 0x02};
    p = leb;
    CHECK(read_encoded_pointer(&p, leb + 3, dw_eh_pe::kSLeb128, bases, &v) == CfiResult::kOk);
    CHECK_EQ(static_cast<int64_t>(v), -2);
    CHECK(read_encoded_pointer(&p, leb + 3, dw_eh_pe::kULeb128, bases, &v) == CfiResult::kOk);
    CHECK_EQ(v, uint64_t{300});
    CHECK(p == leb + 3);
    // Truncated, indirect and an unknown base fail without moving the cursor.
    p = b;
    CHECK(read_encoded_pointer(&p, b + 3, dw_eh_pe::kUData4, bases, &v) == CfiResult::kOutOfRange);
    CHECK(p == b);
    CHECK(read_encoded_pointer(&p, b + 32, dw_eh_pe::kIndirect | dw_eh_pe::kPcRel | dw_eh_pe::kSData4,
                               bases, &v) == CfiResult::kUnsupported);
    CHECK(read_encoded_pointer(&p, b + 32, dw_eh_pe::kDataRel | dw_eh_pe::kSData4, PointerBases{}, &v) ==
          CfiResult::kUnsupported);
    const uint8_t endless[12] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    p = endless;
    CHECK(read_encoded_pointer(&p, endless + 12, dw_eh_pe::kULeb128, bases, &v) == CfiResult::kOutOfRange);
}

TEST(unwind_cfi_parse_and_run) {
    FakeModule fm;
    build_fake_module(&fm);
    const ByteRange range{reinterpret_cast<uintptr_t>(g_mod), reinterpret_cast<uintptr_t>(g_mod) + sizeof g_mod};
    Fde f;
    CHECK(find_fde(fm.snap.modules[0].eh, range, fm.text + 0x82, &f) == CfiResult::kOk);
    CHECK_EQ(f.pc_begin, fm.text + 0x80);
    CHECK_EQ(f.pc_end, fm.text + 0xc0);
    CHECK_EQ(f.cie.ra_column, 16u);
    CHECK_EQ(f.cie.data_align, -8);
    CfiRow row;
    // At the first instruction: the CIE's rules only.
    CHECK(run_cfi(f, fm.text + 0x80, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.reg, uint32_t{kRsp});
    CHECK_EQ(row.cfa.offset, 8);
    CHECK(row.regs[kRa].kind == RuleKind::kOffset);
    CHECK_EQ(row.regs[kRa].offset, -8);
    CHECK(row.regs[kRbp].kind == RuleKind::kSameValue);
    // After push rbp.
    CHECK(run_cfi(f, fm.text + 0x82, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.offset, 16);
    CHECK(row.regs[kRbp].kind == RuleKind::kOffset);
    CHECK_EQ(row.regs[kRbp].offset, -16);
    CHECK_EQ(row.cfa.reg, uint32_t{kRsp});
    // After mov rbp, rsp.
    CHECK(run_cfi(f, fm.text + 0x84, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.reg, uint32_t{kRbp});
    CHECK_EQ(row.cfa.offset, 16);
    // Outside every FDE: the [0xc0, 0x100) gap and before the first function.
    CHECK(find_fde(fm.snap.modules[0].eh, range, fm.text + 0xc8, &f) == CfiResult::kNotFound);
    CHECK(find_fde(fm.snap.modules[0].eh, range, fm.text - 1, &f) == CfiResult::kNotFound);
}

// A CIE + one FDE with arbitrary instructions, for interpreter tests. Returns the parsed FDE.
static CfiResult fde_with(const std::vector<uint8_t>& insns, Fde* out, uint64_t begin = 0x1000) {
    alignas(16) static uint8_t buf[512];
    std::memset(buf, 0, sizeof buf);
    Emitter e{buf, 0};
    const size_t cie = emit_cie(e);
    const size_t fde = emit_fde(e, cie, begin, 0x100, insns);
    const ByteRange range{reinterpret_cast<uintptr_t>(buf), reinterpret_cast<uintptr_t>(buf) + e.pos};
    return parse_fde(buf + fde, range, PointerBases{}, out);
}

TEST(unwind_cfi_remember_restore_and_advances) {
    Fde f;
    // push rbp (+1); remember; epilogue pop rbp, CFA rsp+8 (+5: restore rbp); ret at +6;
    // restore_state: body again with CFA rsp+16 and rbp saved.
    const std::vector<uint8_t> insns = {
        0x41, 0x0e, 16, 0x80 | kRbp, 2,  // @1: CFA rsp+16, rbp at CFA-16
        0x0a,                            // remember_state
        0x44, 0x0e, 8, 0xc0 | kRbp,      // @5: CFA rsp+8, restore rbp
        0x41, 0x0b,                      // @6: restore_state
        0x02, 0x10,                      // advance_loc1 16 -> @22
        0x12, kRsp, 0x7c,                // def_cfa_sf rsp, -4 * -8 = 32
        0x03, 0x00, 0x01,                // advance_loc2 256 -> @278, past the FDE
        0x0e, 99,
    };
    CHECK(fde_with(insns, &f) == CfiResult::kOk);
    CfiRow row;
    CHECK(run_cfi(f, 0x1003, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.offset, 16);
    CHECK(row.regs[kRbp].kind == RuleKind::kOffset);
    CHECK(run_cfi(f, 0x1005, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.offset, 8);
    CHECK(row.regs[kRbp].kind == RuleKind::kSameValue);  // restored to the CIE's rule
    CHECK(run_cfi(f, 0x1006, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.offset, 16);
    CHECK(row.regs[kRbp].kind == RuleKind::kOffset);
    CHECK(run_cfi(f, 0x1016, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.offset, 32);
    CHECK(run_cfi(f, 0x10ff, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.offset, 32);
    CHECK(run_cfi(f, 0x1100, &row) == CfiResult::kNotFound);
}

TEST(unwind_cfi_rule_kinds) {
    Fde f;
    const std::vector<uint8_t> insns = {
        0x05, kRbx, 3,         // offset_extended rbx, 3*-8
        0x11, 12, 0x7e,        // offset_extended_sf r12, -2*-8 = +16
        0x09, 13, 14,          // register r13 in r14
        0x07, 15,              // undefined r15
        0x14, 14, 2,           // val_offset r14, 2*-8
        0x10, 3, 2, 0x70, 0,   // expression rbx (block of 2): replaces the offset rule
        0x16, 6, 2, 0x77, 8,   // val_expression rbp: rsp + 8
        0x2e, 24,              // GNU_args_size 24
        0x05, 80, 1,           // a column beyond kCfiRegs: dropped, not an error
        0x00,                  // nop
    };
    CHECK(fde_with(insns, &f) == CfiResult::kOk);
    CfiRow row;
    CHECK(run_cfi(f, 0x1000, &row) == CfiResult::kOk);
    CHECK(row.regs[kRbx].kind == RuleKind::kExpression);
    CHECK_EQ(row.regs[kRbx].reg, 2);  // the block's length, and where it starts:
    CHECK(f.insns[row.regs[kRbx].offset] == 0x70 && f.insns[row.regs[kRbx].offset + 1] == 0);
    CHECK(row.regs[kRbp].kind == RuleKind::kValExpression);
    CHECK_EQ(row.regs[kRbp].reg, 2);
    CHECK(f.insns[row.regs[kRbp].offset] == 0x77);
    CHECK(row.regs[12].kind == RuleKind::kOffset);
    CHECK_EQ(row.regs[12].offset, 16);
    CHECK(row.regs[13].kind == RuleKind::kRegister);
    CHECK_EQ(row.regs[13].reg, 14);
    CHECK(row.regs[15].kind == RuleKind::kUndefined);
    CHECK(row.regs[14].kind == RuleKind::kValOffset);
    CHECK_EQ(row.regs[14].offset, -16);
    CHECK_EQ(row.args_size, uint64_t{24});
}

TEST(unwind_cfi_malformed_programs_fail) {
    Fde f;
    CfiRow row;
    CHECK(fde_with({0x0b}, &f) == CfiResult::kOk);  // restore_state with nothing remembered
    CHECK(run_cfi(f, 0x1000, &row) == CfiResult::kMalformed);
    std::vector<uint8_t> deep(kCfiStateStack + 1, 0x0a);  // one remember_state too many
    CHECK(fde_with(deep, &f) == CfiResult::kOk);
    CHECK(run_cfi(f, 0x1000, &row) == CfiResult::kUnsupported);
    CHECK(fde_with({0x3e}, &f) == CfiResult::kOk);  // unknown opcode
    CHECK(run_cfi(f, 0x1000, &row) == CfiResult::kUnsupported);
    std::vector<uint8_t> long_leb(12, 0x80);  // a uleb operand longer than 10 bytes
    long_leb[0] = 0x0e;
    CHECK(fde_with(long_leb, &f) == CfiResult::kOk);
    CHECK(run_cfi(f, 0x1000, &row) == CfiResult::kOutOfRange);
    // A record whose length runs past the range.
    alignas(8) uint8_t rec[16] = {0xf0, 0, 0, 0};
    const ByteRange range{reinterpret_cast<uintptr_t>(rec), reinterpret_cast<uintptr_t>(rec) + sizeof rec};
    CHECK(parse_fde(rec, range, PointerBases{}, &f) == CfiResult::kOutOfRange);
    // A CIE pointer that leaves the range.
    uint32_t bad[4] = {12, 0x1000, 0, 0};
    const ByteRange r2{reinterpret_cast<uintptr_t>(bad), reinterpret_cast<uintptr_t>(bad) + sizeof bad};
    CHECK(parse_fde(reinterpret_cast<uint8_t*>(bad), r2, PointerBases{}, &f) == CfiResult::kOutOfRange);
}

TEST(unwind_cfi_plt_expression) {
    // The x86_64 lazy-PLT rule: CFA = rsp + 8 + ((rip & 15) >= 11) * 8.
    const uint8_t expr[] = {0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
    uint64_t regs[kCfiRegs] = {};
    regs[kRsp] = 1000;
    regs[kRa] = 0x4010 + 12;
    const uint64_t valid = (uint64_t{1} << kRsp) | (uint64_t{1} << kRa);
    uint64_t cfa = 0;
    CHECK(eval_cfa_expression(expr, sizeof expr, regs, valid, &cfa) == CfiResult::kOk);
    CHECK_EQ(cfa, uint64_t{1016});
    regs[kRa] = 0x4010 + 6;
    CHECK(eval_cfa_expression(expr, sizeof expr, regs, valid, &cfa) == CfiResult::kOk);
    CHECK_EQ(cfa, uint64_t{1008});
    // An unknown register, a memory read and a stack underflow are refused.
    CHECK(eval_cfa_expression(expr, sizeof expr, regs, uint64_t{1} << kRsp, &cfa) == CfiResult::kUnsupported);
    const uint8_t deref[] = {0x77, 0, 0x06};
    CHECK(eval_cfa_expression(deref, sizeof deref, regs, valid, &cfa) == CfiResult::kUnsupported);
    const uint8_t under[] = {0x22};
    CHECK(eval_cfa_expression(under, sizeof under, regs, valid, &cfa) == CfiResult::kMalformed);
}

TEST(unwind_cfi_expressions_read_the_stack_window_only) {
    alignas(8) uint64_t stack[8] = {0, 11, 22, 0x1122334455667788ull, 44, 55, 66, 77};
    const StackWindow w{reinterpret_cast<uintptr_t>(&stack[0]), reinterpret_cast<uintptr_t>(&stack[8])};
    uint64_t regs[kCfiRegs] = {};
    regs[kRbp] = reinterpret_cast<uintptr_t>(&stack[3]);
    const uint64_t valid = uint64_t{1} << kRbp;
    uint64_t v = 0;
    // gcc's realigned frame: CFA = *(rbp - 8)
    const uint8_t drap[] = {0x76, 0x78, 0x06};
    CHECK(eval_cfi_expression(drap, sizeof drap, regs, valid, w, nullptr, &v) == CfiResult::kOk);
    CHECK_EQ(v, uint64_t{22});
    // deref_size 4 (zero-extended), bregx rbp
    const uint8_t sized[] = {0x92, kRbp, 0, 0x94, 4};
    CHECK(eval_cfi_expression(sized, sizeof sized, regs, valid, w, nullptr, &v) == CfiResult::kOk);
    CHECK_EQ(v, uint64_t{0x55667788});
    // Outside the window (the word past its end; no window at all): refused, nothing read.
    regs[kRbp] = reinterpret_cast<uintptr_t>(&stack[0]) + 9 * sizeof stack[0];  // rbp - 8: just past the end
    CHECK(eval_cfi_expression(drap, sizeof drap, regs, valid, w, nullptr, &v) == CfiResult::kUnsupported);
    regs[kRbp] = reinterpret_cast<uintptr_t>(&stack[3]);
    CHECK(eval_cfi_expression(drap, sizeof drap, regs, valid, StackWindow{}, nullptr, &v) == CfiResult::kUnsupported);
    CHECK(eval_cfa_expression(drap, sizeof drap, regs, valid, &v) == CfiResult::kUnsupported);
    // The CFA pushed first (DW_CFA_expression): CFA - 16
    const uint64_t cfa = 1000;
    const uint8_t below[] = {0x40, 0x1c};  // lit16, minus
    CHECK(eval_cfi_expression(below, sizeof below, regs, valid, w, &cfa, &v) == CfiResult::kOk);
    CHECK_EQ(v, uint64_t{984});
    // pick, rot, div, mod, abs
    const uint8_t stackops[] = {0x37, 0x32, 0x31, 0x17, 0x15, 2, 0x1b, 0x1d};  // 7 2 1 rot pick2 div mod
    CHECK(eval_cfi_expression(stackops, sizeof stackops, regs, valid, w, nullptr, &v) == CfiResult::kOk);
    CHECK_EQ(v, uint64_t{1});  // [1 7 2] -> pick 2: [1 7 2 1] -> 2/1 = 2: [1 7 2] -> 7 % 2 = 1: [1 1]
    const uint8_t by_zero[] = {0x31, 0x30, 0x1b};
    CHECK(eval_cfi_expression(by_zero, sizeof by_zero, regs, valid, w, nullptr, &v) == CfiResult::kMalformed);
    const uint8_t neg_abs[] = {0x35, 0x1f, 0x19};  // 5 neg abs
    CHECK(eval_cfi_expression(neg_abs, sizeof neg_abs, regs, valid, w, nullptr, &v) == CfiResult::kOk);
    CHECK_EQ(v, uint64_t{5});
}

// The unwinder over the x86_64 fake module: the unwinder takes this machine's DWARF columns.
#if defined(__x86_64__)

namespace {

// The fake stack of the fake module's chain f1 <- f2 <- f3 <- f4 (no FDE) <- f4 (no FDE).
struct FakeStack {
    alignas(16) uint64_t s[64] = {};
    RegisterContext regs;
    uintptr_t lo() const { return reinterpret_cast<uintptr_t>(&s[0]); }
    uintptr_t hi() const { return reinterpret_cast<uintptr_t>(&s[64]); }
    uint64_t at(int i) const { return reinterpret_cast<uintptr_t>(&s[i]); }
};

void build_fake_stack(const FakeModule& fm, FakeStack* fs) {
    const uint64_t t = fm.text;
    fs->regs.pc = t + 5;         // in f1 after push rbp
    fs->regs.sp = fs->at(4);
    fs->regs.fp = 0xdead;        // f1 uses rbp as a general register: garbage
    fs->regs.callee_saved[0] = 0xbbbb;
    fs->s[4] = fs->at(20);       // f1 saved rbp: f3's frame pointer
    fs->s[5] = t + 0x51;         // into f2; f1's CFA = &s[6]
    fs->s[8] = 0x1234;           // f2 saved rbx
    fs->s[9] = t + 0x91;         // into f3; f2's CFA = &s[10]
    fs->s[20] = fs->at(30);      // f3 saved rbp (f4's frame record)
    fs->s[21] = t + 0xc1;        // into f4; f3's CFA = rbp + 16 = &s[22]
    fs->s[30] = fs->at(40);      // f4's frame record: next record, return address
    fs->s[31] = t + 0xd1;
    fs->s[40] = 0;               // last record: return address 0 ends the stack
    fs->s[41] = 0;
}

}  // namespace

TEST(unwind_native_fake_stack_cfi_then_fp) {
    FakeModule fm;
    build_fake_module(&fm);
    FakeStack fs;
    build_fake_stack(fm, &fs);
    uint64_t pcs[16] = {};
    UnwindStatus st;
    const uint32_t n = unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st);
    CHECK_EQ(n, 5u);
    CHECK_EQ(st.depth, 5u);
    CHECK_EQ(pcs[0], fm.text + 5);
    CHECK_EQ(pcs[1], fm.text + 0x51);
    CHECK_EQ(pcs[2], fm.text + 0x91);
    CHECK_EQ(pcs[3], fm.text + 0xc1);
    CHECK_EQ(pcs[4], fm.text + 0xd1);
    CHECK_EQ(st.cfi_steps, 3);
    CHECK_EQ(st.fp_steps, 2);
    CHECK(st.stop == UnwindStop::kBottom);
    CHECK(!st.truncated);
}

namespace {

// A fake module of three FDEs: f1 [0, 0x40) and f3 [0x80, 0xc0) with the instructions given,
// f2 [0x40, 0x80) the fake module's own (`sub rsp` to a 32-byte frame, rbx saved at CFA - 16).
void build_three_fdes(FakeModule* fm, const std::vector<uint8_t>& f1_insns,
                      const std::vector<uint8_t>& f3_insns) {
    std::memset(g_mod, 0, sizeof g_mod);
    fm->text = reinterpret_cast<uintptr_t>(g_mod) + 0x800;
    Emitter eh{g_mod, 0x100};
    const size_t cie = emit_cie(eh);
    const size_t f1 = emit_fde(eh, cie, fm->text, 0x40, f1_insns);
    const size_t f2 = emit_fde(eh, cie, fm->text + 0x40, 0x40, {0x44, 0x0e, 32, 0x80 | kRbx, 2});
    const size_t f3 = emit_fde(eh, cie, fm->text + 0x80, 0x40, f3_insns);
    eh.u32(0);
    const size_t fdes[3] = {f1, f2, f3};
    index_fake_module(fdes, fm);
}

}  // namespace

TEST(unwind_native_realigned_frame_by_expressions) {
    // gcc's stack realignment (DRAP), as in AVX code: after `lea r10,[rsp+8]; and rsp,-32;
    // push [r10-8]; push rbp; mov rbp,rsp; push r10` the CFA is *(rbp - 8) and rbp is saved at
    // rbp + 0, both DWARF expressions. Before, the deref stopped the walk (unsupported_cfi).
    FakeModule fm;
    build_three_fdes(&fm,
                     {0x0f, 3, 0x70 | kRbp, 0x78, 0x06,     // def_cfa_expression: *(rbp - 8)
                      0x10, kRbp, 2, 0x70 | kRbp, 0x00},    // expression rbp: at rbp + 0
                     {0x41, 0x0e, 16, 0x80 | kRbp, 2, 0x43, 0x0d, kRbp});
    FakeStack fs;
    const uint64_t t = fm.text;
    fs.regs.pc = t + 5;
    fs.regs.sp = fs.at(2);       // realigned, below the frame
    fs.regs.fp = fs.at(10);
    fs.s[9] = fs.at(30);         // rbp - 8: the saved r10, the CFA
    fs.s[10] = fs.at(40);        // rbp + 0: the caller's rbp
    fs.s[29] = t + 0x51;         // CFA - 8: the return address, into f2
    fs.s[33] = t + 0x91;         // f2's (CFA &s[34]), into f3
    fs.s[40] = fs.at(50);        // f3's frame record (its rbp is the one f1's rule restored)
    fs.s[41] = t + 0xc1;         // into f4 (no FDE): frame pointer &s[50]
    fs.s[50] = 0;
    fs.s[51] = 0;
    uint64_t pcs[16] = {};
    UnwindStatus st;
    const uint32_t n = unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st);
    CHECK_EQ(n, 4u);
    CHECK_EQ(pcs[1], t + 0x51);
    CHECK_EQ(pcs[2], t + 0x91);
    CHECK_EQ(pcs[3], t + 0xc1);
    CHECK_EQ(st.cfi_steps, 3);
    CHECK(st.stop == UnwindStop::kBottom);
    // The saved r10 pointing outside the stack: a CFA out of bounds.
    fs.s[9] = 0x10;
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 1u);
    CHECK(st.stop == UnwindStop::kStackBounds);
    fs.s[9] = fs.at(30);
    // rbp - 8 below the stack: the CFA's word is not read at all.
    fs.regs.fp = fs.lo();
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 1u);
    CHECK(st.stop == UnwindStop::kUnsupportedCfi);
    // rbp's slot outside the stack (rbp - 8 the last word, rbp + 0 past the end): rbp is
    // unknown after f1, so f3's CFA (rbp + 16) cannot be had.
    fs.regs.fp = fs.hi();
    fs.s[63] = fs.at(30);
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 3u);
    CHECK(st.stop == UnwindStop::kUnsupportedCfi);
}

// The step cache over the fake module: plain rows are kept and the next walk takes them,
// with the same pcs and stop; rows with expressions are never kept; a kept row whose saved
// register lies outside the stack fails as the full step does.
TEST(unwind_native_step_cache_takes_only_plain_rows) {
    std::unique_ptr<StepCache> cache = StepCache::create();
    CHECK(cache != nullptr);
    FakeModule fm;
    build_fake_module(&fm);
    fm.snap.step_cache = cache.get();
    fm.snap.generation = 1;
    FakeStack fs;
    build_fake_stack(fm, &fs);
    uint64_t first[16] = {}, second[16] = {};
    UnwindStatus a, b;
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), first, 16, &a), 5u);
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), second, 16, &b), 5u);
    for (int i = 0; i < 5; ++i) CHECK_EQ(second[i], first[i]);
    CHECK_EQ(a.cached_steps, 0);
    CHECK_EQ(b.cfi_steps, 3);
    CHECK_EQ(b.cached_steps, 3);  // f1, f2, f3: each a plain row
    CHECK_EQ(b.fp_steps, 2);
    CHECK(b.stop == UnwindStop::kBottom && a.stop == UnwindStop::kBottom);
    // A new snapshot generation: nothing kept is taken.
    fm.snap.generation = 2;
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), second, 16, &b), 5u);
    CHECK_EQ(b.cached_steps, 0);
    // A kept row whose saved register is now outside the stack: the same stop as without it.
    fm.snap.generation = 1;
    FakeModule plain = fm;
    plain.snap.step_cache = nullptr;
    uint64_t pcs_plain[16] = {};
    UnwindStatus c;
    const uint32_t n_plain = unwind_native(&plain.snap, fs.regs, fs.lo(), fs.hi() - 8 * 40, pcs_plain, 16, &c);
    const uint32_t n_kept = unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi() - 8 * 40, second, 16, &b);
    CHECK_EQ(n_kept, n_plain);
    CHECK(b.stop == c.stop);
    CHECK(b.stop != UnwindStop::kBottom);

    // f1 by expressions (DRAP): its row is never kept; f2's and f3's are.
    build_three_fdes(&fm,
                     {0x0f, 3, 0x70 | kRbp, 0x78, 0x06,   // def_cfa_expression: *(rbp - 8)
                      0x10, kRbp, 2, 0x70 | kRbp, 0x00},  // expression rbp: at rbp + 0
                     {0x41, 0x0e, 16, 0x80 | kRbp, 2, 0x43, 0x0d, kRbp});
    fm.snap.step_cache = cache.get();
    fm.snap.generation = 3;
    FakeStack fx;
    const uint64_t t = fm.text;
    fx.regs.pc = t + 5;
    fx.regs.sp = fx.at(2);
    fx.regs.fp = fx.at(10);
    fx.s[9] = fx.at(30);
    fx.s[10] = fx.at(40);
    fx.s[29] = t + 0x51;
    fx.s[33] = t + 0x91;
    fx.s[40] = fx.at(50);
    fx.s[41] = t + 0xc1;
    fx.s[50] = 0;
    fx.s[51] = 0;
    CHECK_EQ(unwind_native(&fm.snap, fx.regs, fx.lo(), fx.hi(), first, 16, &a), 4u);
    CHECK_EQ(unwind_native(&fm.snap, fx.regs, fx.lo(), fx.hi(), second, 16, &b), 4u);
    for (int i = 0; i < 4; ++i) CHECK_EQ(second[i], first[i]);
    CHECK_EQ(b.cfi_steps, 3);
    CHECK_EQ(b.cached_steps, 2);
}

TEST(unwind_native_drap_prologue_cfa_is_r10) {
    // gcc's realigning prologue, between `lea r10,[rsp+8]` and `push rbp; mov rbp,rsp`: the
    // row is `DW_CFA_def_cfa: r10 ofs 0`, the return address at CFA - 8. r10 comes from the
    // signal's context (RegisterContext::drap), for the interrupted frame only: a caller
    // whose CFA is r10 too cannot be walked. Before, r10 was never known: unsupported_cfi.
    FakeModule fm;
    const uint8_t kR10 = 10;
    build_three_fdes(&fm, {0x0c, kR10, 0}, {0x0c, kR10, 0});  // f1, f3: def_cfa r10 + 0
    FakeStack fs;
    const uint64_t t = fm.text;
    fs.regs.pc = t + 5;
    fs.regs.sp = fs.at(2);       // realigned (and rsp, -32), below the frame
    fs.regs.fp = 0;
    fs.regs.drap = fs.at(10);    // r10 = the CFA: the caller's rsp at the call + 8
    fs.regs.drap_known = true;
    fs.s[9] = t + 0x51;          // CFA - 8: the return address, into f2 (CFA &s[10])
    fs.s[13] = t + 0x91;         // f2: CFA = rsp + 32 = &s[14], into f3
    uint64_t pcs[16] = {};
    UnwindStatus st;
    const uint32_t n = unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st);
    CHECK_EQ(n, 3u);
    CHECK_EQ(pcs[1], t + 0x51);
    CHECK_EQ(pcs[2], t + 0x91);
    CHECK(st.stop == UnwindStop::kUnsupportedCfi);  // f3's CFA is r10: not the caller's to know
    CHECK_EQ(st.cfi_steps, 2);
    // Without r10 (a context that does not have it): the walk stops at the first frame.
    fs.regs.drap_known = false;
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 1u);
    CHECK(st.stop == UnwindStop::kUnsupportedCfi);
}

namespace {
// A `call rel32` in the fake text ending at text + `ra_off`, calling text + `to_off`.
void put_call(uint32_t ra_off, uint32_t to_off) {
    g_mod[0x800 + ra_off - 5] = 0xE8;
    const int32_t rel = static_cast<int32_t>(to_off) - static_cast<int32_t>(ra_off);
    std::memcpy(&g_mod[0x800 + ra_off - 4], &rel, 4);
}
}  // namespace

TEST(unwind_native_leaf_without_cfi_left_by_its_return_address) {
    // Hand-written assembly with no FDE at all (OpenBLAS's dcopy_k, MKL's scopy kernels never
    // touch rsp): the interrupted pc's return address is the word at rsp. Taken only when it
    // follows a call; before, the frame-pointer fallback skipped the caller or failed.
    FakeModule fm;
    build_fake_module(&fm);
    const uint64_t t = fm.text;
    put_call(0x51, 0xc0);  // a call in f2, ending at t + 0x51, of the FDE-less code at t + 0xc0
    FakeStack fs;
    fs.regs.pc = t + 0xc4;           // no FDE there
    fs.regs.sp = fs.at(4);
    fs.regs.fp = fs.at(20);
    fs.s[4] = t + 0x51;              // the return address, into f2 (CFA = rsp + 32 = &s[9])
    fs.s[8] = t + 0x91;              // f2's, into f3 (CFA = rbp + 16 = &s[22])
    fs.s[20] = fs.at(30);
    fs.s[21] = 0;                    // f3 returns to nothing: the bottom
    uint64_t pcs[16] = {};
    UnwindStatus st;
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 3u);
    CHECK_EQ(pcs[1], t + 0x51);
    CHECK_EQ(pcs[2], t + 0x91);
    CHECK_EQ(st.leaf_steps, 1);
    CHECK_EQ(st.cfi_steps, 2);
    CHECK(st.stop == UnwindStop::kBottom);
    // A frame below the return address (MKL's sgemm kernel: `sub $0x80, %rsp`, rbx saved at
    // (%rsp)): the first word up the stack that follows a call. The callee-saved registers
    // may have been changed under that frame: unknown, so f3's CFA (rbp + 16) is not had.
    fs.regs.sp = fs.at(3);
    fs.s[3] = 0x1234;
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 3u);
    CHECK_EQ(pcs[1], t + 0x51);
    CHECK_EQ(st.leaf_steps, 1);
    CHECK(st.stop == UnwindStop::kUnsupportedCfi);
    fs.regs.sp = fs.at(4);
    // A word that follows no call (data the leaf pushed): not taken; the frame pointer then.
    g_mod[0x800 + 0x51 - 5] = 0;
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 1u);
    CHECK_EQ(st.leaf_steps, 0);
    // Only the interrupted frame: a later frame without an FDE goes by its frame pointer.
    put_call(0x51, 0xc0);
    fs.regs.pc = t + 5;  // f1: CFA = rsp + 16 from +1
    fs.s[5] = t + 0xd1;  // f1 returns into the FDE-less range
    fs.s[4] = fs.at(40);
    fs.regs.fp = 0xdead;
    CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 2u);
    CHECK_EQ(st.leaf_steps, 0);
}

TEST(unwind_native_leaf_that_realigned_the_stack_by_its_saved_stack_pointer) {
    // OpenBLAS's Haswell dgemm kernel (no FDE): `sub $0x60,%rsp`, rbx rbp r12-r15 saved at
    // (%rsp).., `mov %rsp,%rbx; sub $0x7080,%rsp; and $-4096,%rsp`, rbp then used for data.
    // Its return address lies 3.6 KiB above rsp, past the scan: it is searched from rbx, the
    // stack pointer the kernel kept. The caller (dsyrk_kernel_L, here f3) has CFA = rbp + 16:
    // its rbp is the one the kernel saved, found as the word pointing at a frame record above.
    // Before, 21 % of numpy's SVD walks stopped at the kernel (no_cfi).
    FakeModule fm;
    build_fake_module(&fm);
    const uint64_t t = fm.text;
    put_call(0x51, 0x80);  // f2 calls f3; f3 calls the kernel at t + 0xc0
    put_call(0x91, 0xc0);
    struct {
        alignas(16) uint64_t s[512] = {};
        uintptr_t at(int i) const { return reinterpret_cast<uintptr_t>(&s[i]); }
    } big;
    const uintptr_t lo = big.at(0), hi = big.at(512);
    RegisterContext regs;
    regs.pc = t + 0xc4;                 // in the kernel: no FDE
    regs.sp = big.at(0);                // realigned, 200 words below its frame
    regs.fp = 0xdead;                   // rbp holds data
    regs.callee_saved[0] = big.at(200);  // rbx: the stack pointer before the realignment
    big.s[200] = 0x1234;                // the caller's rbx, saved
    big.s[201] = big.at(240);           // the caller's rbp, saved: f3's frame record
    big.s[212] = t + 0x91;              // the return address, into f3
    big.s[240] = 0;                     // f3's frame record: the caller's rbp ...
    big.s[241] = t + 0x51;              // ... and f3's return address, into f2 (CFA &s[246])
    big.s[245] = 0;                     // f2 returns to nothing: the bottom
    uint64_t pcs[16] = {};
    UnwindStatus st;
    CHECK_EQ(unwind_native(&fm.snap, regs, lo, hi, pcs, 16, &st), 3u);
    CHECK_EQ(pcs[1], t + 0x91);
    CHECK_EQ(pcs[2], t + 0x51);
    CHECK_EQ(st.leaf_steps, 1);
    CHECK_EQ(st.cfi_steps, 2);
    CHECK(st.stop == UnwindStop::kBottom);
    // rbp not saved in the kernel's frame: f3's CFA cannot be had (as before for such frames).
    big.s[201] = 0;
    CHECK_EQ(unwind_native(&fm.snap, regs, lo, hi, pcs, 16, &st), 2u);
    CHECK_EQ(pcs[1], t + 0x91);
    CHECK(st.stop == UnwindStop::kUnsupportedCfi);
    // A saved word pointing at a "record" whose return address follows no call: not taken.
    big.s[201] = big.at(240);
    g_mod[0x800 + 0x51 - 5] = 0;
    CHECK_EQ(unwind_native(&fm.snap, regs, lo, hi, pcs, 16, &st), 2u);
    CHECK(st.stop == UnwindStop::kUnsupportedCfi);
    g_mod[0x800 + 0x51 - 5] = 0xE8;
    // A word the kernel's frame never wrote, left by a call long returned at the same depth
    // (f1 calling f2, which has CFI, so not the kernel): passed over for the real one.
    put_call(0x11, 0x40);
    big.s[207] = t + 0x11;
    CHECK_EQ(unwind_native(&fm.snap, regs, lo, hi, pcs, 16, &st), 3u);
    CHECK_EQ(pcs[1], t + 0x91);
    CHECK(st.stop == UnwindStop::kBottom);
    // ... and so is one whose call's target starts after the kernel's pc.
    put_call(0x11, 0xd0);
    CHECK_EQ(unwind_native(&fm.snap, regs, lo, hi, pcs, 16, &st), 3u);
    CHECK_EQ(pcs[1], t + 0x91);
    // One calling the FDE-less code below the pc cannot be refuted by its call; but f1's
    // frame, were it the caller (CFA = rsp + 16 from +1: [&s[208], &s[209])), holds no other
    // return address: taken (the heuristic's known limit).
    put_call(0x11, 0xc0);
    CHECK(unwind_native(&fm.snap, regs, lo, hi, pcs, 16, &st) >= 2u);
    CHECK_EQ(pcs[1], t + 0x11);
    big.s[207] = 0;
    // An indirect call (`call *%rax`) cannot be refuted either (3.13's libffi left one in the
    // frame of a ctypes test's kernel). Taken as the return address, it would make f3 the
    // caller, whose frame [&s[206], &s[241]) (CFA = rbp + 16, the saved rbp) holds the real
    // return address: that one is taken instead.
    g_mod[0x800 + 0x95 - 2] = 0xFF;
    g_mod[0x800 + 0x95 - 1] = 0xD0;
    big.s[205] = t + 0x95;
    CHECK_EQ(unwind_native(&fm.snap, regs, lo, hi, pcs, 16, &st), 3u);
    CHECK_EQ(pcs[1], t + 0x91);
    CHECK_EQ(pcs[2], t + 0x51);
    CHECK(st.stop == UnwindStop::kBottom);
    big.s[205] = 0;
    // No register holds a stack pointer above rsp: the kernel's caller is not found (the old
    // scan from rsp alone), and the frame pointer is garbage.
    regs.callee_saved[0] = 0x4321;
    CHECK_EQ(unwind_native(&fm.snap, regs, lo, hi, pcs, 16, &st), 1u);
    CHECK_EQ(st.leaf_steps, 0);
    CHECK(st.stop == UnwindStop::kNoCfi);
}

TEST(unwind_native_stack_bounds_stop_reads) {
    FakeModule fm;
    build_fake_module(&fm);
    FakeStack fs;
    build_fake_stack(fm, &fs);
    uint64_t pcs[16] = {};
    UnwindStatus st;
    // f2's return-address slot s[9] is outside [lo, &s[9]): the step fails, nothing is read.
    uint32_t n = unwind_native(&fm.snap, fs.regs, fs.lo(), fs.at(9), pcs, 16, &st);
    CHECK_EQ(n, 2u);
    CHECK(st.stop == UnwindStop::kStackBounds);
    // f3's return address slot s[21] excluded (the CFA &s[22] is too).
    n = unwind_native(&fm.snap, fs.regs, fs.lo(), fs.at(21), pcs, 16, &st);
    CHECK_EQ(n, 3u);
    CHECK(st.stop == UnwindStop::kStackBounds);
    // A lower bound above the saved slots.
    n = unwind_native(&fm.snap, fs.regs, fs.at(5), fs.hi(), pcs, 16, &st);
    CHECK_EQ(n, 1u);
    CHECK(st.stop == UnwindStop::kStackBounds);
}

TEST(unwind_native_stop_reasons) {
    FakeModule fm;
    build_fake_module(&fm);
    uint64_t pcs[16] = {};
    UnwindStatus st;
    {
        FakeStack fs;
        build_fake_stack(fm, &fs);
        fs.s[21] = 0x10;  // f3 returns into no module
        CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 3u);
        CHECK(st.stop == UnwindStop::kOutsideModules);
    }
    {
        FakeStack fs;
        build_fake_stack(fm, &fs);
        fs.s[30] = fs.at(24);  // f4's saved frame pointer goes down the stack
        CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 5u);
        CHECK(st.stop == UnwindStop::kNoCfi);
        CHECK_EQ(st.fp_steps, 1);
    }
    {
        FakeStack fs;
        build_fake_stack(fm, &fs);
        CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 2, &st), 2u);
        CHECK(st.truncated);
        CHECK(st.stop == UnwindStop::kDepthCap);
        CHECK_EQ(pcs[1], fm.text + 0x51);
    }
    {
        FakeStack fs;
        build_fake_stack(fm, &fs);
        CHECK_EQ(unwind_native(nullptr, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 1u);
        CHECK(st.stop == UnwindStop::kNoSnapshot);
        CHECK_EQ(pcs[0], fm.text + 5);
    }
    {
        // A pc without FDE and a frame pointer below the stack pointer: nothing to follow.
        FakeStack fs;
        build_fake_stack(fm, &fs);
        fs.regs.pc = fm.text + 0xc4;
        fs.regs.fp = fs.at(2);
        CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 1u);
        CHECK(st.stop == UnwindStop::kNoCfi);
    }
    CHECK(std::strcmp(unwind_stop_name(UnwindStop::kStackBounds), "stack_bounds") == 0);
}

#endif  // __x86_64__

TEST(unwind_snapshot_find) {
    UnwindSnapshot s;
    s.modules.resize(2);
    s.ranges = {ExecRange{0x1000, 0x2000, 0}, ExecRange{0x3000, 0x3800, 1}};
    CHECK(s.find(0xfff) == nullptr);
    CHECK(s.find(0x1000) == &s.modules[0]);
    CHECK(s.find(0x1fff) == &s.modules[0]);
    CHECK(s.find(0x2000) == nullptr);
    CHECK(s.find(0x37ff) == &s.modules[1]);
    CHECK(s.find(0x3800) == nullptr);
    UnwindSnapshot empty;
    CHECK(empty.find(0x1000) == nullptr);
}

// The unwinder over an aarch64 fake module (cross-built and run under qemu-user by
// `make test-arm64`). What differs from x86_64: the return address arrives in the link
// register x30 (column 30) and is saved by the callee only if it calls on, the CFA starts at
// sp + 0 (column 31), a frame record is {x29, x30} stored by `stp x29, x30, [sp, #-n]!`, and
// saved return addresses may carry a pointer-authentication signature in their high bits.
#if defined(__aarch64__)

namespace {

constexpr uint8_t kX19 = 19, kX29 = 29, kX30 = 30, kSp = 31;

// CIE as gcc emits it for aarch64: code align 4, data align -8, RA column 30, CFA = sp + 0
// and no rule for x30 (same value: still in the link register).
size_t emit_cie_aarch64(Emitter& e) {
    const size_t start = e.pos;
    e.u32(0);
    e.u32(0);
    e.u8(1);
    e.u8('z');
    e.u8('R');
    e.u8(0);
    e.uleb(4);
    e.sleb(-8);
    e.u8(kX30);
    e.uleb(1);
    e.u8(dw_eh_pe::kAbsPtr);
    e.bytes({0x0c, kSp, 0});
    while ((e.pos - start) % 8 != 0) e.u8(0);
    const uint32_t len = static_cast<uint32_t>(e.pos - start - 4);
    std::memcpy(e.base + start, &len, 4);
    return start;
}

// g1 [0,0x40): a leaf without a frame. g2 [0x40,0x80): `stp x29, x30, [sp, #-32]!` at +0,
// `mov x29, sp` at +4. g3 [0x80,0xc0): from +4, CFA = sp + 16, x30 at CFA - 8, x19 at
// CFA - 16 (no frame record). [0xc0,0x100): no FDE.
void build_fake_module_aarch64(FakeModule* fm) {
    std::memset(g_mod, 0, sizeof g_mod);
    fm->text = reinterpret_cast<uintptr_t>(g_mod) + 0x800;
    Emitter eh{g_mod, 0x100};
    const size_t cie = emit_cie_aarch64(eh);
    const size_t g1 = emit_fde(eh, cie, fm->text, 0x40, {});
    // advance 1 (4 bytes); CFA = sp + 32; x29 at CFA - 32, x30 at CFA - 24; advance 1; CFA = x29 + 32.
    const size_t g2 = emit_fde(eh, cie, fm->text + 0x40, 0x40,
                               {0x41, 0x0e, 32, 0x80 | kX29, 4, 0x80 | kX30, 3, 0x41, 0x0d, kX29});
    const size_t g3 = emit_fde(eh, cie, fm->text + 0x80, 0x40, {0x41, 0x0e, 16, 0x80 | kX30, 1, 0x80 | kX19, 2});
    eh.u32(0);
    const size_t fdes[3] = {g1, g2, g3};
    index_fake_module(fdes, fm);
}

// A pointer-authentication signature in the bits above Linux's 48-bit user address space.
constexpr uint64_t kPac = uint64_t{0x5a3c} << 48;

struct FakeStack64 {
    alignas(16) uint64_t s[64] = {};
    RegisterContext regs;
    uintptr_t lo() const { return reinterpret_cast<uintptr_t>(&s[0]); }
    uintptr_t hi() const { return reinterpret_cast<uintptr_t>(&s[64]); }
    uint64_t at(int i) const { return reinterpret_cast<uintptr_t>(&s[i]); }
};

// Interrupted in the leaf g1, called from g2, called from g3, called from g4 (no FDE), called
// from g4 again; every return address that went through memory or lr is signed.
void build_fake_stack_aarch64(const FakeModule& fm, FakeStack64* fs) {
    const uint64_t t = fm.text;
    fs->regs.pc = t + 8;
    fs->regs.sp = fs->at(4);        // g1 has no frame: g2's sp
    fs->regs.fp = fs->at(4);        // g2's frame record
    fs->regs.lr = (t + 0x48) | kPac;  // into g2, after its prologue
    fs->regs.callee_saved[0] = 0xbbbb;
    fs->s[4] = fs->at(20);          // g2 saved x29: g3 left it as g4's frame pointer
    fs->s[5] = (t + 0x88) | kPac;   // g2 saved x30: into g3; g2's CFA = x29 + 32 = &s[8]
    fs->s[8] = 0x1919;              // g3 saved x19
    fs->s[9] = (t + 0xc8) | kPac;   // g3 saved x30: into g4; g3's CFA = &s[10]
    fs->s[20] = fs->at(30);         // g4's frame record: {next record, return address}
    fs->s[21] = (t + 0xd8) | kPac;
    fs->s[30] = 0;                  // the last record: return address 0 ends the stack
    fs->s[31] = 0;
}

}  // namespace

TEST(unwind_aarch64_leaf_lr_then_cfi_then_fp) {
    FakeModule fm;
    build_fake_module_aarch64(&fm);
    FakeStack64 fs;
    build_fake_stack_aarch64(fm, &fs);
    uint64_t pcs[16] = {};
    UnwindStatus st;
    const uint32_t n = unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st);
    CHECK_EQ(n, 5u);
    CHECK_EQ(pcs[0], fm.text + 8);
    CHECK_EQ(pcs[1], fm.text + 0x48);  // from lr: the leaf saved nothing
    CHECK_EQ(pcs[2], fm.text + 0x88);  // from g2's frame record, signature stripped
    CHECK_EQ(pcs[3], fm.text + 0xc8);  // from g3's CFI slot
    CHECK_EQ(pcs[4], fm.text + 0xd8);  // g4 has no FDE: its frame record
    CHECK_EQ(st.cfi_steps, 3);
    CHECK_EQ(st.fp_steps, 2);
    CHECK(st.stop == UnwindStop::kBottom);
    CHECK(!st.truncated);
}

TEST(unwind_aarch64_rules_of_the_prologue) {
    FakeModule fm;
    build_fake_module_aarch64(&fm);
    const ByteRange range{reinterpret_cast<uintptr_t>(g_mod), reinterpret_cast<uintptr_t>(g_mod) + sizeof g_mod};
    Fde f;
    CHECK(find_fde(fm.snap.modules[0].eh, range, fm.text + 0x44, &f) == CfiResult::kOk);
    CHECK_EQ(f.cie.ra_column, 30u);
    CHECK_EQ(f.cie.code_align, 4u);
    CfiRow row;
    // Before the stp: CFA = sp, x30 still the link register.
    CHECK(run_cfi(f, fm.text + 0x40, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.reg, uint32_t{kSp});
    CHECK_EQ(row.cfa.offset, 0);
    CHECK(row.regs[kX30].kind == RuleKind::kSameValue);
    // After the stp (one 4-byte instruction): both saved, CFA = sp + 32.
    CHECK(run_cfi(f, fm.text + 0x44, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.offset, 32);
    CHECK(row.regs[kX29].kind == RuleKind::kOffset);
    CHECK_EQ(row.regs[kX29].offset, -32);
    CHECK_EQ(row.regs[kX30].offset, -24);
    // After mov x29, sp.
    CHECK(run_cfi(f, fm.text + 0x48, &row) == CfiResult::kOk);
    CHECK_EQ(row.cfa.reg, uint32_t{kX29});
}

TEST(unwind_aarch64_stops) {
    FakeModule fm;
    build_fake_module_aarch64(&fm);
    uint64_t pcs[16] = {};
    UnwindStatus st;
    {
        // The leaf's link register points at no module.
        FakeStack64 fs;
        build_fake_stack_aarch64(fm, &fs);
        fs.regs.lr = 0x10 | kPac;
        CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 1u);
        CHECK(st.stop == UnwindStop::kOutsideModules);
    }
    {
        // g2's frame record lies above the stack's upper bound.
        FakeStack64 fs;
        build_fake_stack_aarch64(fm, &fs);
        CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.at(5), pcs, 16, &st), 2u);
        CHECK(st.stop == UnwindStop::kStackBounds);
    }
    {
        // Interrupted in g2's prologue right after the stp, before x29 is set: the CFA comes
        // from sp, the return address from the slot the stp just wrote.
        FakeStack64 fs;
        build_fake_stack_aarch64(fm, &fs);
        fs.regs.pc = fm.text + 0x44;
        fs.regs.sp = fs.at(8);  // CFA = sp + 32 = &s[12]: x29, x30 at s[8], s[9]
        fs.regs.fp = 0xdead;    // still the caller's, here garbage: not followed
        fs.s[8] = 0xdead;
        fs.s[9] = (fm.text + 0x88) | kPac;
        fs.s[13] = 0;           // g3's saved x30 (CFA &s[14] - 8): 0 ends the stack
        CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 16, &st), 2u);
        CHECK_EQ(pcs[1], fm.text + 0x88);
        CHECK_EQ(st.cfi_steps, 2);
        CHECK(st.stop == UnwindStop::kBottom);
    }
    {
        FakeStack64 fs;
        build_fake_stack_aarch64(fm, &fs);
        CHECK_EQ(unwind_native(&fm.snap, fs.regs, fs.lo(), fs.hi(), pcs, 3, &st), 3u);
        CHECK(st.truncated);
        CHECK(st.stop == UnwindStop::kDepthCap);
    }
}

#endif  // __aarch64__
