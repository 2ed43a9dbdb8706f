// unwind/split_parts.cpp: scan_direct_branches and find_split_parts (see split_parts.h).
#include "unwind/split_parts.h"

#include <cstring>
#include <vector>

namespace spprof {

namespace {

int64_t sign_extend(uint64_t v, unsigned bits) {
    const uint64_t m = uint64_t{1} << (bits - 1);
    return static_cast<int64_t>((v ^ m) - m);
}

bool same_cfa(const CfaRule& a, const CfaRule& b) {
    return a.expr == nullptr && b.expr == nullptr && a.defined && b.defined && a.reg == b.reg &&
           a.offset == b.offset;
}

// The CFI row at `pc` of the FDE covering it, in the module that holds it.
bool row_at(const UnwindSnapshot& snap, uint64_t pc, Fde* fde, CfiRow* row) {
    const UnwindModule* m = snap.find(static_cast<uintptr_t>(pc));
    if (m == nullptr || m->eh.table == nullptr) return false;
    if (find_fde(m->eh, m->cfi_range, pc, fde) != CfiResult::kOk) return false;
    return run_cfi(*fde, pc, row) == CfiResult::kOk;
}

// True when the FDE's first row is the CIE's initial one: a function's entry, where nothing
// is saved yet. A split part starts inside the frame: its FDE first restates the frame.
bool starts_like_a_function(const Fde& fde) {
    CfiRow first, entry;
    Fde cie_only = fde;
    cie_only.insns_end = cie_only.insns;
    if (run_cfi(fde, fde.pc_begin, &first) != CfiResult::kOk ||
        run_cfi(cie_only, fde.pc_begin, &entry) != CfiResult::kOk)
        return true;  // unreadable: not taken as a part
    if (!same_cfa(first.cfa, entry.cfa)) return false;
    for (uint32_t i = 0; i < kCfiRegs; ++i)
        if (first.regs[i].kind != entry.regs[i].kind || first.regs[i].offset != entry.regs[i].offset)
            return false;
    return true;
}

bool known(const EvalRanges& r, uint64_t pc) { return is_eval_frame(r, pc); }

}  // namespace

uint32_t scan_direct_branches(const uint8_t* code, size_t n, uint64_t addr, DirectBranch* out, uint32_t max) {
    uint32_t count = 0;
#if defined(__x86_64__)
    for (size_t i = 0; i + 5 <= n && count < max; ++i) {
        size_t len = 0;
        if (code[i] == 0xE9) {
            len = 5;  // jmp rel32
        } else if (code[i] == 0x0F && i + 6 <= n && (code[i + 1] & 0xF0) == 0x80) {
            len = 6;  // jcc rel32
        } else {
            continue;
        }
        int32_t rel = 0;
        std::memcpy(&rel, code + i + len - 4, 4);
        out[count++] = DirectBranch{addr + i, addr + i + len + static_cast<uint64_t>(int64_t{rel})};
    }
#elif defined(__aarch64__)
    for (size_t i = 0; i + 4 <= n && count < max; i += 4) {
        uint32_t insn = 0;
        std::memcpy(&insn, code + i, 4);
        int64_t off = 0;
        if ((insn & 0xFC000000u) == 0x14000000u) {
            off = sign_extend(insn & 0x03FFFFFFu, 26) * 4;  // b
        } else if ((insn & 0xFF000010u) == 0x54000000u || (insn & 0x7E000000u) == 0x34000000u) {
            off = sign_extend((insn >> 5) & 0x7FFFFu, 19) * 4;  // b.cond, cbz/cbnz
        } else {
            continue;
        }
        out[count++] = DirectBranch{addr + i, addr + i + static_cast<uint64_t>(off)};
    }
#else
    (void)code;
    (void)n;
    (void)addr;
    (void)out;
    (void)max;
#endif
    (void)sign_extend;
    return count;
}

uint32_t find_split_parts(const UnwindSnapshot& snap, uint64_t lo, uint64_t hi, EvalRanges* out) {
    // The code is read in place: it must lie in one executable range of one image.
    const UnwindModule* m = snap.find(static_cast<uintptr_t>(lo));
    if (m == nullptr || hi <= lo || snap.find(static_cast<uintptr_t>(hi - 1)) != m) return 0;
    const size_t n = static_cast<size_t>(hi - lo);
    std::vector<DirectBranch> branches(n / 4 + 1);
    const uint32_t found = scan_direct_branches(reinterpret_cast<const uint8_t*>(lo), n, lo, branches.data(),
                                                static_cast<uint32_t>(branches.size()));
    uint32_t added = 0;
    for (uint32_t i = 0; i < found && out->count < EvalRanges::kMax; ++i) {
        const DirectBranch& b = branches[i];
        if ((b.to >= lo && b.to < hi) || known(*out, b.to)) continue;
        Fde from_fde, to_fde;
        CfiRow from_row, to_row;
        if (!row_at(snap, b.from, &from_fde, &from_row) || !row_at(snap, b.to, &to_fde, &to_row)) continue;
        // Same frame on both sides of the jump, and the target's FDE starts mid-frame: a part
        // of this function, not a tail call to another one (which starts like a function).
        if (!same_cfa(from_row.cfa, to_row.cfa) || starts_like_a_function(to_fde)) continue;
        out->lo[out->count] = to_fde.pc_begin;
        out->hi[out->count] = to_fde.pc_end;
        ++out->count;
        ++added;
    }
    return added;
}

}  // namespace spprof
