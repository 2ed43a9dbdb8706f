// unwind/unwinder.cpp: unwind_native (see unwinder.h). SIGNAL-SAFE and NO-HEAP throughout.
#include "unwind/unwinder.h"

#include <cstring>
#include <utility>

#include "capture/reader.h"  // SPPROF_NO_SANITIZE_ADDRESS
#include "unwind/fp_walk.h"
#include "unwind/step_cache.h"

namespace spprof {

const char* unwind_stop_name(UnwindStop stop) {
    switch (stop) {
        case UnwindStop::kBottom: return "bottom";
        case UnwindStop::kOutsideModules: return "outside_modules";
        case UnwindStop::kNoCfi: return "no_cfi";
        case UnwindStop::kBadCfi: return "bad_cfi";
        case UnwindStop::kUnsupportedCfi: return "unsupported_cfi";
        case UnwindStop::kStackBounds: return "stack_bounds";
        case UnwindStop::kNotRising: return "not_rising";
        case UnwindStop::kDepthCap: return "depth_cap";
        case UnwindStop::kNoSnapshot: return "no_snapshot";
        case UnwindStop::kUnsupported: return "unsupported";
    }
    return "unknown";
}

#if defined(__x86_64__) || defined(__aarch64__)

namespace {

// DWARF register columns of this architecture (System V x86_64 psABI 3.38; AAPCS64 DWARF).
#if defined(__x86_64__)
constexpr uint32_t kSpCol = 7;
constexpr uint32_t kFpCol = 6;
constexpr uint32_t kPcCol = 16;  // the return-address column doubles as rip in expressions
constexpr uint32_t kCalleeCols[] = {3, 12, 13, 14, 15};  // rbx, r12-r15 (RegisterContext order)
constexpr uint32_t kDrapCol = 10;  // r10: known in the interrupted frame only (caller-saved)
#else
constexpr uint32_t kSpCol = 31;
constexpr uint32_t kFpCol = 29;
constexpr uint32_t kLrCol = 30;
constexpr uint32_t kCalleeCols[] = {19, 20, 21, 22, 23, 24, 25, 26, 27, 28};
#endif

static_assert(kCfiRegs <= 64, "validity is a 64-bit mask");

struct RegFile {
    uint64_t r[kCfiRegs];
    uint64_t valid;

    bool has(uint32_t col) const { return col < kCfiRegs && ((valid >> col) & 1) != 0; }
    void set(uint32_t col, uint64_t v) {
        r[col] = v;
        valid |= uint64_t{1} << col;
    }
    void clear(uint32_t col) { valid &= ~(uint64_t{1} << col); }
};

// read_stack_window(StackWindow{lo, hi}, addr, 8, out), inlined: a walk reads ~5 words a frame.
SPPROF_NO_SANITIZE_ADDRESS inline bool read_stack_word(uintptr_t addr, uintptr_t lo, uintptr_t hi, uint64_t* out) {
    if (hi <= lo || addr < lo || addr > hi || hi - addr < 8) return false;
    std::memcpy(out, reinterpret_cast<const void*>(addr), 8);
    return true;
}

// Reads `n` bytes of code at `addr` when [addr, addr + n) lies in one module's executable
// ranges (mapped and readable on Linux and macOS); nothing else is read.
SPPROF_NO_SANITIZE_ADDRESS bool read_code(const UnwindSnapshot* snapshot, uint64_t addr, size_t n, void* out) {
    if (addr + n < addr) return false;
    const UnwindModule* m = snapshot->find(static_cast<uintptr_t>(addr));
    if (m == nullptr || snapshot->find(static_cast<uintptr_t>(addr + n - 1)) != m) return false;
    std::memcpy(out, reinterpret_cast<const void*>(static_cast<uintptr_t>(addr)), n);
    return true;
}

// True when `ra` follows a call instruction in a module: the check that makes a word read off
// the stack (or a link register) a return address.
bool follows_call(const UnwindSnapshot* snapshot, uint64_t ra) {
#if defined(__x86_64__)
    // b[7 - k] is the byte at ra - k. `call rel32` (E8, 5 bytes) and `call` through a register
    // or memory (FF /2: ModRM reg field 2) in each length its addressing modes give.
    uint8_t b[7];
    if (!read_code(snapshot, ra - 7, sizeof b, b)) return false;
    const auto ff2 = [&](int at, int mod) { return b[at] == 0xFF && ((b[at + 1] >> 3) & 7) == 2 && (b[at + 1] >> 6) == mod; };
    const auto rm = [&](int at) { return b[at + 1] & 7; };
    return b[2] == 0xE8 ||                                       // call rel32
           ff2(5, 3) || (ff2(5, 0) && rm(5) != 4 && rm(5) != 5) ||  // call *%reg, *(%reg)
           (ff2(4, 0) && rm(4) == 4) ||                          // call *(%base,%index)
           (ff2(4, 1) && rm(4) != 4) || (ff2(3, 1) && rm(3) == 4) ||  // disp8, with SIB
           (b[1] == 0xFF && b[2] == 0x15) ||                     // call *disp32(%rip)
           (ff2(1, 2) && rm(1) != 4) || (ff2(0, 2) && rm(0) == 4);   // disp32, with SIB
#else
    // BL imm26, or BLR / BLRAA / BLRAB / BLRAAZ / BLRABZ Xn (pointer authentication).
    uint32_t insn = 0;
    if (!read_code(snapshot, ra - 4, sizeof insn, &insn)) return false;
    return (insn & 0xFC000000u) == 0x94000000u || (insn & 0xFFFFFC1Fu) == 0xD63F0000u ||
           (insn & 0xFEFFF800u) == 0xD63F0800u;
#endif
}

#if defined(__x86_64__)
// Words above the stack pointer searched for the return address of a function without CFI: a
// leaf kernel's frame (MKL's sgemm kernels: `sub $0x80, %rsp` and a few saved registers).
constexpr uint32_t kLeafScanWords = 64;
// Registers that may hold the stack pointer a kernel had before it realigned the stack to a
// page for a buffer (OpenBLAS's Haswell dgemm: `mov %rsp, %rbx; sub $0x7080, %rsp; and
// $-4096, %rsp`): rbx, rbp, r12-r15, searched from as from the stack pointer.
constexpr uint32_t kSavedSpCols[] = {3, 6, 12, 13, 14, 15};

// Largest distance from a function's start to a pc taken as inside it, for a function
// without CFI (OpenBLAS's dgemm_kernel_HASWELL is 28 KiB).
constexpr uint64_t kMaxKernelBytes = 256 * 1024;

// Reads a word of module `m`'s data segments (a GOT entry); nothing else is read.
SPPROF_NO_SANITIZE_ADDRESS bool read_data_word(const UnwindModule* m, uintptr_t addr, uint64_t* out) {
    if (m == nullptr || !m->holds_data(addr, sizeof *out)) return false;
    std::memcpy(out, reinterpret_cast<const void*>(addr), sizeof *out);
    return true;
}

// What the direct call (`call rel32`) ending at `ra` calls: its target, or for a PLT stub
// (`jmp *GOT(%rip)`, after endbr64 and bnd when present) the address in its GOT entry, read
// only inside the stub's module's data segments. 0: not a direct call, or unknown.
uint64_t direct_call_target(const UnwindSnapshot* snapshot, uint64_t ra) {
    uint8_t b[5];
    if (!read_code(snapshot, ra - 5, sizeof b, b) || b[0] != 0xE8) return 0;
    int32_t rel = 0;
    std::memcpy(&rel, b + 1, 4);
    const uint64_t target = ra + static_cast<uint64_t>(int64_t{rel});
    uint8_t p[11];
    if (!read_code(snapshot, target, sizeof p, p)) return target;
    uint32_t at = 0;
    if (p[0] == 0xF3 && p[1] == 0x0F && p[2] == 0x1E && p[3] == 0xFA) at = 4;  // endbr64
    if (p[at] == 0xF2) ++at;                                                   // bnd
    if (p[at] != 0xFF || p[at + 1] != 0x25) return target;
    int32_t disp = 0;
    std::memcpy(&disp, p + at + 2, 4);
    const uintptr_t got = static_cast<uintptr_t>(target + at + 6 + static_cast<uint64_t>(int64_t{disp}));
    uint64_t dest = 0;
    return read_data_word(snapshot->find(static_cast<uintptr_t>(target)), got, &dest) ? dest : 0;
}

// Whether the call before `ra` may call the interrupted function at `pc` (which has no FDE).
// kNo: it calls, directly, a function that has CFI (so not this one) or that starts after pc
// or too far before it. A word the function's frame never wrote may hold the return address
// of a call long returned (the clock read before the kernel call, at the same depth): this
// rejects most of those. kMaybe: an indirect call (OpenBLAS's and MKL's kernel tables), which
// cannot be checked. kYes: a direct call of a function without CFI that starts at or below pc.
enum class CallInto { kNo, kMaybe, kYes };

CallInto call_into(const UnwindSnapshot* snapshot, uint64_t ra, uint64_t pc) {
    const uint64_t target = direct_call_target(snapshot, ra);
    if (target == 0) return CallInto::kMaybe;
    if (target > pc || pc - target >= kMaxKernelBytes) return CallInto::kNo;
    const UnwindModule* m = snapshot->find(static_cast<uintptr_t>(target));
    if (m == nullptr || m->eh.table == nullptr) return CallInto::kYes;
    Fde fde;
    return find_fde(m->eh, m->cfi_range, target, &fde) != CfiResult::kOk ? CallInto::kYes : CallInto::kNo;
}

// The word of `kLeafScanWords` from `from` (and below `end`) that follows a call into the
// interrupted function at `pc`: the first that is proven to (a direct call of it), else the
// first that may be (an indirect call). Its address in *slot. A kernel's frame may leave
// words between its saved registers and its return address unwritten (OpenBLAS's PROLOGUE
// reserves 0x60 bytes and saves six registers), holding return addresses of indirect calls
// long returned: a direct call of the kernel further up is its own return address.
bool scan_for_return(const UnwindSnapshot* snapshot, uint64_t pc, uint64_t from, uintptr_t lo, uintptr_t hi,
                     uint64_t* ra, uintptr_t* slot, uint64_t end = UINT64_MAX) {
    bool maybe = false;
    for (uint32_t i = 0; i < kLeafScanWords; ++i) {
        const uintptr_t at = static_cast<uintptr_t>(from + 8 * i);
        if (at >= end) break;
        uint64_t v = 0;
        if (!read_stack_word(at, lo, hi, &v)) break;
        if (v == 0 || !follows_call(snapshot, v)) continue;
        const CallInto c = call_into(snapshot, v, pc);
        if (c == CallInto::kYes) {
            *ra = v;
            *slot = at;
            return true;
        }
        if (c == CallInto::kMaybe && !maybe) {
            maybe = true;
            *ra = v;
            *slot = at;
        }
    }
    return maybe;
}

// The caller's frame pointer, when the scanned frame [from, slot) saved it before using rbp
// for itself (OpenBLAS's kernels save rbx, rbp, r12-r15 there): of the words pointing above
// the return address's slot at a frame record {saved rbp, return address after a call}, the
// lowest, since the caller's own record is the nearest one above its call (a saved rbx may
// point into a frame further up). 0: none found, the caller's rbp is unknown.
uint64_t saved_frame_pointer(const UnwindSnapshot* snapshot, uintptr_t from, uintptr_t slot, uintptr_t lo,
                             uintptr_t hi) {
    uint64_t best = 0;
    for (uintptr_t at = from; at < slot; at += 8) {
        uint64_t v = 0;
        uint64_t ret = 0;
        if (!read_stack_word(at, lo, hi, &v)) return 0;
        if (v > slot && (best == 0 || v < best) && (v & 7) == 0 &&
            read_stack_word(static_cast<uintptr_t>(v + 8), lo, hi, &ret) && ret != 0 && follows_call(snapshot, ret))
            best = v;
    }
    return best;
}

// The CFA of the function `ra` returns into, were `slot` its return address's word: by its CFI
// at the call, from the stack pointer (slot + 8) or from `fp` (its frame pointer, when the
// frame saved one). False: no FDE, or a rule this check does not follow.
bool caller_cfa(const UnwindSnapshot* snapshot, uint64_t ra, uintptr_t slot, uint64_t fp, uint64_t* cfa) {
    const UnwindModule* m = snapshot->find(static_cast<uintptr_t>(ra - 1));
    if (m == nullptr || m->eh.table == nullptr) return false;
    Fde fde;
    CfiRow row;
    if (find_fde(m->eh, m->cfi_range, ra - 1, &fde) != CfiResult::kOk || run_cfi(fde, ra - 1, &row) != CfiResult::kOk ||
        row.cfa.expr != nullptr)
        return false;
    if (row.cfa.reg == kSpCol) {
        *cfa = uint64_t{slot} + 8 + static_cast<uint64_t>(row.cfa.offset);
    } else if (row.cfa.reg == kFpCol && fp != 0) {
        *cfa = fp + static_cast<uint64_t>(row.cfa.offset);
    } else {
        return false;
    }
    return *cfa > uint64_t{slot} + 8;
}

// A word found may be one a call long returned left in the interrupted function's frame, below
// its real return address (the frame's words it never wrote). The frame its caller would then
// have, [slot + 8, CFA - 8) by the caller's CFI, holds that real return address: a word that
// follows a call into pc, which a real frame's locals seldom do. Such a word is taken instead,
// and the check made again from it (up to kLeafReconsiderations times).
constexpr uint32_t kLeafReconsiderations = 4;

void reconsider_stale(const UnwindSnapshot* snapshot, uint64_t pc, uintptr_t from, uintptr_t lo, uintptr_t hi,
                      uint64_t* ra, uintptr_t* slot, uint64_t* caller_fp) {
    for (uint32_t i = 0; i < kLeafReconsiderations; ++i) {
        uint64_t cfa = 0, ra2 = 0;
        uintptr_t slot2 = 0;
        if (!caller_cfa(snapshot, *ra, *slot, *caller_fp, &cfa) ||
            !scan_for_return(snapshot, pc, uint64_t{*slot} + 8, lo, hi, &ra2, &slot2, cfa - 8))
            return;
        *ra = ra2;
        *slot = slot2;
        *caller_fp = saved_frame_pointer(snapshot, from, *slot, lo, hi);
    }
}
#endif

// The return address of the interrupted function when it has no CFI at all (hand-written
// assembly: BLAS kernels), taken only when it follows a call. On x86_64 the first such word at
// or above the stack pointer, else above a stack pointer saved in a callee-saved register
// (`*slot`: the word's address; `*caller_fp`: the caller's rbp if the frame saved it, else 0);
// on aarch64 the link register (`*slot` = 0). A frame the function never wrote may hold a
// return address left by a call long returned: the walk then goes wrong from here, which is
// why this is counted (native_leaf_steps) and only taken where CFI has nothing to say.
bool leaf_return_address(const UnwindSnapshot* snapshot, const RegFile& cur, uintptr_t lo, uintptr_t hi,
                         uint64_t* ra, uintptr_t* slot, uint64_t* caller_fp) {
    *caller_fp = 0;
#if defined(__x86_64__)
    if (!cur.has(kSpCol) || !cur.has(kPcCol)) return false;
    const uint64_t sp = cur.r[kSpCol];
    const uint64_t pc = cur.r[kPcCol];
    // A page-aligned rsp in code without CFI is a kernel that realigned the stack for a
    // buffer: the words right above it are that buffer, maybe never written, holding return
    // addresses of calls long returned. Its saved stack pointer is searched from first then.
    const bool realigned = (sp & 0xfff) == 0;
    uint64_t from = sp;
    bool found = !realigned && scan_for_return(snapshot, pc, sp, lo, hi, ra, slot);
    for (uint32_t i = 0; !found && i < sizeof kSavedSpCols / sizeof kSavedSpCols[0]; ++i) {
        from = cur.has(kSavedSpCols[i]) ? cur.r[kSavedSpCols[i]] : 0;
        found = from > sp && from < hi && (from & 7) == 0 && scan_for_return(snapshot, pc, from, lo, hi, ra, slot);
    }
    if (!found && realigned) {
        from = sp;
        found = scan_for_return(snapshot, pc, sp, lo, hi, ra, slot);
    }
    if (found && *slot != sp) {
        *caller_fp = saved_frame_pointer(snapshot, static_cast<uintptr_t>(from), *slot, lo, hi);
        reconsider_stale(snapshot, pc, static_cast<uintptr_t>(from), lo, hi, ra, slot, caller_fp);
    }
    return found;
#else
    (void)lo;
    (void)hi;
    if (!cur.has(kLrCol)) return false;
    const uint64_t v = cur.r[kLrCol];
    if (v == 0 || !follows_call(snapshot, v)) return false;
    *ra = v;
    *slot = 0;
    return true;
#endif
}

#if defined(__x86_64__)
constexpr uint8_t kSameValueCol = kDrapCol;  // forgotten after a step unless a rule restored it
#else
constexpr uint8_t kSameValueCol = 0xFF;
#endif

// A step by a row the cache kept (step_cache.h): what cfi_step does for a row of that shape.
bool cached_step(const CachedStep& c, const RegFile& cur, uintptr_t lo, uintptr_t hi, RegFile* next,
                 uint64_t* ra, bool* ra_from_stack, UnwindStop* why) {
    if (c.flags & CachedStep::kRaUndefined) {
        *ra = 0;
        *why = UnwindStop::kBottom;
        return false;
    }
    if (!cur.has(c.cfa_col)) {
        *why = UnwindStop::kUnsupportedCfi;
        return false;
    }
    const uint64_t cfa = cur.r[c.cfa_col] + static_cast<uint64_t>(int64_t{c.cfa_offset});
    if (cfa < lo || cfa > hi) {
        *why = UnwindStop::kStackBounds;
        return false;
    }
    *next = cur;
    const uint32_t saves = c.saves <= kMaxCachedSaves ? c.saves : kMaxCachedSaves;
    for (uint32_t i = 0; i < saves; ++i) {
        uint64_t v = 0;
        if (!read_stack_word(static_cast<uintptr_t>(cfa + static_cast<uint64_t>(int64_t{c.offset[i]})), lo, hi, &v)) {
            *why = UnwindStop::kStackBounds;
            return false;
        }
        next->set(c.col[i], v);
    }
    if (!next->has(c.ra_col)) {
        *why = UnwindStop::kUnsupportedCfi;
        return false;
    }
    *ra = strip_pointer_auth(next->r[c.ra_col]);
    *ra_from_stack = (c.flags & CachedStep::kRaOnStack) != 0;
    next->set(kSpCol, cfa);
#if defined(__x86_64__)
    if (c.flags & CachedStep::kSameValueAt) next->clear(kDrapCol);
#endif
    return true;
}

UnwindStop stop_for(CfiResult res) {
    switch (res) {
        case CfiResult::kUnsupported: return UnwindStop::kUnsupportedCfi;
        case CfiResult::kNotFound: return UnwindStop::kNoCfi;
        default: return UnwindStop::kBadCfi;
    }
}

// One CFI step from `cur` (at `pc`, looked up as `lookup_pc`) into `next`.
// Returns kBottom with *ra = 0 when the return address is undefined. `ra_from_stack` tells
// whether the return address was read from the stack (false: a leaf's link register).
// `plain` (may be null): set, with *plain_ok, when the row has the shape the step cache keeps.
bool cfi_step(const Fde& fde, uint64_t lookup_pc, const RegFile& cur, uintptr_t lo, uintptr_t hi,
              RegFile* next, uint64_t* ra, bool* ra_from_stack, UnwindStop* why, CachedStep* plain, bool* plain_ok) {
    CfiRow row;
    CfiResult res = run_cfi(fde, lookup_pc, &row);
    if (res != CfiResult::kOk) {
        *why = stop_for(res);
        return false;
    }
    const uint32_t ra_col = fde.cie.ra_column;
    if (plain != nullptr) *plain_ok = cached_step_from_row(row, ra_col, kSameValueCol, plain);
    if (ra_col >= kCfiRegs) {
        *why = UnwindStop::kUnsupportedCfi;
        return false;
    }
    if (row.regs[ra_col].kind == RuleKind::kUndefined) {
        *ra = 0;
        *why = UnwindStop::kBottom;
        return false;
    }
    const StackWindow stack{lo, hi};
    uint64_t cfa = 0;
    if (row.cfa.expr != nullptr) {
        res = eval_cfi_expression(row.cfa.expr, row.cfa.expr_len, cur.r, cur.valid, stack, nullptr, &cfa);
        if (res != CfiResult::kOk) {
            *why = stop_for(res);
            return false;
        }
    } else {
        if (!cur.has(row.cfa.reg)) {
            *why = UnwindStop::kUnsupportedCfi;  // CFA from a register we do not know
            return false;
        }
        cfa = cur.r[row.cfa.reg] + static_cast<uint64_t>(row.cfa.offset);
    }
    if (cfa < lo || cfa > hi) {
        *why = UnwindStop::kStackBounds;
        return false;
    }
    *next = cur;
    for (uint32_t col = 0; col < kCfiRegs; ++col) {
        const RegRule& rule = row.regs[col];
        switch (rule.kind) {
            case RuleKind::kSameValue: break;
            case RuleKind::kUndefined: next->clear(col); break;
            case RuleKind::kOffset: {
                uint64_t v = 0;
                if (!read_stack_word(static_cast<uintptr_t>(cfa + static_cast<uint64_t>(int64_t{rule.offset})),
                                     lo, hi, &v)) {
                    *why = UnwindStop::kStackBounds;
                    return false;
                }
                next->set(col, v);
                break;
            }
            case RuleKind::kValOffset:
                next->set(col, cfa + static_cast<uint64_t>(int64_t{rule.offset}));
                break;
            case RuleKind::kRegister:
                if (cur.has(rule.reg)) {
                    next->set(col, cur.r[rule.reg]);
                } else {
                    next->clear(col);
                }
                break;
            case RuleKind::kExpression:
            case RuleKind::kValExpression: {
                // The block runs over this frame's registers with the CFA pushed first; its
                // result is where the register was saved (read from the stack), or the value.
                uint64_t v = 0;
                const bool known =
                    rule.reg != 0 &&
                    eval_cfi_expression(fde.insns + rule.offset, rule.reg, cur.r, cur.valid, stack, &cfa, &v) ==
                        CfiResult::kOk &&
                    (rule.kind == RuleKind::kValExpression || read_stack_word(static_cast<uintptr_t>(v), lo, hi, &v));
                if (known) {
                    next->set(col, v);
                    break;
                }
                if (col == ra_col) {
                    *why = UnwindStop::kUnsupportedCfi;
                    return false;
                }
                next->clear(col);  // unknown from here on; a later CFA needing it stops then
                break;
            }
        }
    }
    if (!next->has(ra_col)) {
        *why = UnwindStop::kUnsupportedCfi;
        return false;
    }
    *ra = strip_pointer_auth(next->r[ra_col]);
    *ra_from_stack = row.regs[ra_col].kind == RuleKind::kOffset || row.regs[ra_col].kind == RuleKind::kExpression;
    next->set(kSpCol, cfa);
#if defined(__x86_64__)
    // Caller-saved: "same value" is not a value the caller had, unless a rule restored it.
    if (row.regs[kDrapCol].kind == RuleKind::kSameValue) next->clear(kDrapCol);
#endif
    return true;
}

}  // namespace

uint32_t unwind_native(const UnwindSnapshot* snapshot, const RegisterContext& regs,
                       uintptr_t stack_lo, uintptr_t stack_hi, uint64_t* pcs, uint32_t max,
                       UnwindStatus* status) {
    UnwindStatus local;
    UnwindStatus& st = status != nullptr ? *status : local;
    st = UnwindStatus{};
    if (max == 0 || pcs == nullptr) {
        st.truncated = true;
        st.stop = UnwindStop::kDepthCap;
        return 0;
    }
    uint64_t pc = strip_pointer_auth(regs.pc);
    if (pc == 0) {
        st.stop = UnwindStop::kBottom;
        return 0;
    }
    pcs[st.depth++] = pc;
    if (snapshot == nullptr || stack_hi <= stack_lo) {
        st.stop = UnwindStop::kNoSnapshot;
        return st.depth;
    }

    // This frame's registers and its caller's: a step fills the other file from this one,
    // then the two swap roles (one copy a frame, not two).
    RegFile files[2];
    RegFile* cur_file = &files[0];
    RegFile* next_file = &files[1];
    std::memset(cur_file, 0, sizeof *cur_file);
    cur_file->set(kSpCol, regs.sp);
    cur_file->set(kFpCol, regs.fp);
    for (uint32_t i = 0; i < sizeof kCalleeCols / sizeof kCalleeCols[0]; ++i)
        cur_file->set(kCalleeCols[i], regs.callee_saved[i]);
#if defined(__x86_64__)
    cur_file->set(kPcCol, pc);
    if (regs.drap_known) cur_file->set(kDrapCol, regs.drap);
#else
    cur_file->set(kLrCol, strip_pointer_auth(regs.lr));
#endif

    uintptr_t last_fp = 0;
    bool first = true;
    StepCache* const cache = snapshot->step_cache;
    CachedStep cached;
    bool have_cached = cache != nullptr && cache->lookup(pc, snapshot->generation, &cached);
    // Each iteration writes one pc or returns, so it runs at most `max` times.
    for (;;) {
        // A return address points after its call: look the caller up at the call itself.
        const uint64_t lookup_pc = first ? pc : pc - 1;
        const RegFile& cur = *cur_file;
        RegFile& next = *next_file;
        const uint64_t sp = cur.r[kSpCol];
        uint64_t ra = 0;
        bool ra_from_stack = true;
        bool stepped = false;
        CfiResult found = CfiResult::kNotFound;
        if (have_cached) {
            // This pc's row, worked out by an earlier walk: no lookup, no CFI to run.
            UnwindStop why = UnwindStop::kBottom;
            if (!cached_step(cached, cur, stack_lo, stack_hi, &next, &ra, &ra_from_stack, &why)) {
                st.stop = why;
                return st.depth;
            }
            if (st.cfi_steps < UINT16_MAX) ++st.cfi_steps;
            if (st.cached_steps < UINT16_MAX) ++st.cached_steps;
            stepped = true;
            found = CfiResult::kOk;
        }
        const UnwindModule* mod = stepped ? nullptr : snapshot->find(static_cast<uintptr_t>(lookup_pc));
        if (mod != nullptr && mod->eh.table != nullptr) {
            Fde fde;  // only here: constructing one costs about what a kept step does
            found = find_fde(mod->eh, mod->cfi_range, lookup_pc, &fde);
            if (found == CfiResult::kOk) {
                UnwindStop why = UnwindStop::kBottom;
                CachedStep plain;
                bool plain_ok = false;
                const bool ok = cfi_step(fde, lookup_pc, cur, stack_lo, stack_hi, &next, &ra, &ra_from_stack, &why,
                                         cache != nullptr ? &plain : nullptr, &plain_ok);
                if (plain_ok) cache->insert(lookup_pc, snapshot->generation, plain);
                if (!ok) {
                    st.stop = why;
                    return st.depth;
                }
                if (st.cfi_steps < UINT16_MAX) ++st.cfi_steps;
                stepped = true;
            } else if (found != CfiResult::kNotFound) {
                st.stop = stop_for(found);
                return st.depth;
            }
        }
        uintptr_t slot = 0;
        uint64_t caller_fp = 0;
        if (!stepped && first && found == CfiResult::kNotFound &&
            leaf_return_address(snapshot, cur, stack_lo, stack_hi, &ra, &slot, &caller_fp)) {
            // The interrupted function has no CFI: its return address is the first word at
            // or above the stack pointer (or a saved one) that follows a call (x86_64), or
            // the link register (aarch64). Counted: a heuristic.
            next = cur;
#if defined(__x86_64__)
            next.clear(kDrapCol);
            next.set(kSpCol, slot + 8);
            // A frame below the return address may hold callee-saved registers the function
            // then changed: their values are no longer known.
            if (slot != sp) {
                next.clear(kFpCol);
                for (uint32_t i = 0; i < sizeof kCalleeCols / sizeof kCalleeCols[0]; ++i) next.clear(kCalleeCols[i]);
                if (caller_fp != 0) next.set(kFpCol, caller_fp);  // saved in the frame: a caller's CFA may be rbp
            }
#else
            ra_from_stack = false;
#endif
            if (st.leaf_steps < UINT16_MAX) ++st.leaf_steps;
            stepped = true;
        }
        if (!stepped) {
            // Frame-pointer fallback: the record {saved fp, return address} at fp, which must
            // lie above the stack pointer and above the last record followed.
            const uint64_t fp = cur.r[kFpCol];
            const uintptr_t floor = static_cast<uintptr_t>(sp > last_fp ? sp : last_fp + 1);
            FrameRecord rec;
            if (!cur.has(kFpCol) ||
                !read_frame_record(StackReader{}, static_cast<uintptr_t>(fp), floor,
                                   StackBounds{stack_lo, stack_hi}, &rec)) {
                st.stop = UnwindStop::kNoCfi;
                return st.depth;
            }
            next = cur;
#if defined(__x86_64__)
            next.clear(kDrapCol);
#endif
            next.set(kFpCol, rec.caller_fp);
            next.set(kSpCol, fp + kFrameRecordBytes);
            ra = rec.ret;
#if defined(__aarch64__)
            next.set(kLrCol, ra);
#endif
            last_fp = static_cast<uintptr_t>(fp);
            if (st.fp_steps < UINT16_MAX) ++st.fp_steps;
        }
        if (ra == 0) {
            st.stop = UnwindStop::kBottom;
            return st.depth;
        }
        const uint64_t new_sp = next.r[kSpCol];
        // The stack must grow towards the caller; only a leaf whose return address was still
        // in a register (aarch64 lr) may leave the stack pointer where it was.
        if (new_sp < sp || (new_sp == sp && (ra_from_stack || !first))) {
            st.stop = UnwindStop::kNotRising;
            return st.depth;
        }
        // The caller's row, if an earlier walk kept it, is also proof that ra - 1 is in a
        // module (only pcs with an FDE are kept); the next iteration uses it.
        have_cached = cache != nullptr && cache->lookup(ra - 1, snapshot->generation, &cached);
        if (!have_cached && snapshot->find(static_cast<uintptr_t>(ra - 1)) == nullptr) {
            st.stop = UnwindStop::kOutsideModules;
            return st.depth;
        }
        if (st.depth == max) {
            st.truncated = true;
            st.stop = UnwindStop::kDepthCap;
            return st.depth;
        }
        pcs[st.depth++] = ra;
        pc = ra;
#if defined(__x86_64__)
        next.set(kPcCol, pc);
#endif
        std::swap(cur_file, next_file);
        first = false;
    }
}

#else  // not x86_64/arm64

uint32_t unwind_native(const UnwindSnapshot*, const RegisterContext&, uintptr_t, uintptr_t,
                       uint64_t*, uint32_t, UnwindStatus* status) {
    if (status != nullptr) {
        *status = UnwindStatus{};
        status->stop = UnwindStop::kUnsupported;
    }
    return 0;
}

#endif

}  // namespace spprof
