// unwind/eh_frame.h: reading .eh_frame / .eh_frame_hdr and running DWARF call-frame programs.
//
// The unwinder (unwinder.h) needs, for one pc, the rules that recover the caller's registers:
// where the Canonical Frame Address (CFA) is, and where each callee-saved register and the
// return address were saved relative to it. The linker leaves them in the loaded image:
// .eh_frame_hdr (the PT_GNU_EH_FRAME segment) holds a sorted table {initial pc, FDE address};
// each FDE (Frame Description Entry) covers one function (or one .cold part) and points to a
// CIE (Common Information Entry) with the shared alignment factors, the return-address column
// and the initial instructions. Executing the CIE's then the FDE's instructions up to the pc
// yields one row of the conceptual unwind table: a CfiRow.
//
// Everything here is SIGNAL-SAFE and NO-HEAP: no allocation, no locks, no libc call but
// memcpy. Every byte read is checked against a ByteRange (the mapped segment that holds the
// data: a truncated or corrupt table ends in an error, never in a read outside it), every
// LEB128 is at most 10 bytes, every loop is bounded by the bytes it consumes and by a step
// cap, and the remember/restore stack has a fixed depth. What gcc and clang emit for x86_64
// and aarch64 is covered; DWARF expressions are evaluated for the CFA (the PLT rule
// `rsp + 8 + ((rip & 15) >= 11) * 8`, gcc's realigned frames `*(rbp - 8)`) and for registers
// saved by an expression (DW_CFA_expression / val_expression); the only memory they read is
// the unwound thread's stack, bounds-checked (eval_cfi_expression).
//
// Architecture-neutral: register numbers are DWARF columns; the unwinder maps them. Tested on
// hand-built byte arrays (tests/native/test_unwind_cfi.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace spprof {

// DWARF columns tracked per row: x86_64 uses 0-16 (16 = return address / rip), aarch64 0-31
// (30 = x30 / lr, 31 = sp). Rules for higher columns (aarch64 d8-d15 = 72-79, the
// RA_SIGN_STATE pseudo-register 34) are parsed and dropped: no unwinder step needs them.
constexpr uint32_t kCfiRegs = 33;

// Depth of the DW_CFA_remember_state stack. gcc and clang do not nest it (one remember/restore
// pair around each epilogue in the middle of a function); 4 leaves room and keeps the
// interpreter's state small on the signal stack (each row is about 300 bytes; run_cfi uses
// about 1.6 KiB of stack in all). Deeper nesting fails the lookup with kUnsupported.
constexpr uint32_t kCfiStateStack = 4;

// Upper bound on CFA instructions executed for one lookup; a real FDE has a few dozen to a
// few thousand. Each instruction also consumes at least one byte, so this is a second bound.
constexpr uint32_t kCfiMaxInstructions = 1u << 16;

// [lo, hi) of mapped memory a parser may read.
struct ByteRange {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    bool contains(uintptr_t p, size_t n) const { return p >= lo && p <= hi && n <= hi - p; }
};

enum class CfiResult : uint8_t {
    kOk,
    kNotFound,     // no FDE covers the pc
    kOutOfRange,   // a read would leave its ByteRange (truncated or corrupt data)
    kMalformed,    // inconsistent data (bad version, bad CIE pointer, stack over/underflow)
    kUnsupported,  // valid DWARF this reader does not implement (indirect pointer, DW_OP_deref...)
};

// DW_EH_PE pointer encodings (the low nibble is the format, bits 4-6 the base, bit 7 indirect).
namespace dw_eh_pe {
constexpr uint8_t kAbsPtr = 0x00, kULeb128 = 0x01, kUData2 = 0x02, kUData4 = 0x03,
                  kUData8 = 0x04, kSLeb128 = 0x09, kSData2 = 0x0a, kSData4 = 0x0b,
                  kSData8 = 0x0c;
constexpr uint8_t kPcRel = 0x10, kTextRel = 0x20, kDataRel = 0x30, kFuncRel = 0x40,
                  kAligned = 0x50, kIndirect = 0x80, kOmit = 0xff;
}  // namespace dw_eh_pe

// Bases for relative encodings. `data` is the .eh_frame_hdr address (DW_EH_PE_datarel in
// .eh_frame_hdr and in FDEs of x86_64/aarch64 ELF); 0 means "not available" (-> kUnsupported).
struct PointerBases {
    uintptr_t data = 0;
};

// Read one encoded pointer at *p (advancing it), never reading at or beyond `end`. pcrel uses
// the address of the encoded field itself (the data is read in place, in the mapped image).
CfiResult read_encoded_pointer(const uint8_t** p, const uint8_t* end, uint8_t encoding,
                               const PointerBases& bases, uint64_t* out);

// Parsed CIE. `insns` .. `insns_end` are its initial instructions.
struct Cie {
    uint64_t code_align = 1;
    int64_t data_align = 1;
    uint32_t ra_column = 0;
    uint8_t fde_encoding = dw_eh_pe::kAbsPtr;  // 'R' augmentation, else absptr
    bool has_z = false;                        // 'z': FDEs carry an augmentation length
    bool signal_frame = false;                 // 'S': the pc is exact, not a return address
    const uint8_t* insns = nullptr;
    const uint8_t* insns_end = nullptr;
};

// Parsed FDE, with its CIE. Covers [pc_begin, pc_end).
struct Fde {
    uint64_t pc_begin = 0;
    uint64_t pc_end = 0;
    const uint8_t* insns = nullptr;
    const uint8_t* insns_end = nullptr;
    Cie cie;
};

// Parse the CIE record starting at `cie` (its length field). Versions 1, 3 and 4.
CfiResult parse_cie(const uint8_t* cie, const ByteRange& range, Cie* out);

// Parse the FDE record starting at `fde` (its length field) and the CIE it points to. Both must
// lie inside `range` (the segment holding .eh_frame).
CfiResult parse_fde(const uint8_t* fde, const ByteRange& range, const PointerBases& bases,
                    Fde* out);

enum class RuleKind : uint8_t {
    kSameValue = 0,  // the default: the caller's value is the callee's (callee-saved convention)
    kUndefined,      // no value (for the return address column: the outermost frame)
    kOffset,         // saved at CFA + offset
    kValOffset,      // the value is CFA + offset
    kRegister,       // the value is in register `reg`
    kExpression,     // DW_CFA_expression: saved at the address the block computes (CFA pushed)
    kValExpression,  // DW_CFA_val_expression: the value is what the block computes
};

// Longest DWARF expression block kept for a register rule (real ones are 2-10 bytes); a longer
// one leaves the register unknown.
constexpr uint32_t kMaxRuleExpression = 255;

// For kExpression/kValExpression, `offset` is where the block starts relative to the FDE's
// instructions (Fde::insns; the CIE's blocks too) and `reg` its length, 0 when not kept.
struct RegRule {
    int32_t offset = 0;  // factored offsets of real code fit easily; larger ones -> kMalformed
    RuleKind kind = RuleKind::kSameValue;
    uint8_t reg = 0;
};

// How to compute the CFA: register + offset, or a DWARF expression (pointer into the image).
struct CfaRule {
    int64_t offset = 0;
    uint32_t reg = 0;
    const uint8_t* expr = nullptr;  // non-null: DW_CFA_def_cfa_expression, `expr_len` bytes
    uint32_t expr_len = 0;
    bool defined = false;           // some def_cfa* ran
};

struct CfiRow {
    CfaRule cfa;
    RegRule regs[kCfiRegs];
    uint64_t args_size = 0;  // DW_CFA_GNU_args_size, informational
};

// Run the CIE's initial instructions, then the FDE's up to (and including) the row that
// applies to `pc` (pc_begin <= pc < pc_end). `row` receives the result.
CfiResult run_cfi(const Fde& fde, uint64_t pc, CfiRow* row);

// The memory an expression may read: the unwound thread's stack [lo, hi). Empty: none.
struct StackWindow {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
};

// Reads `size` bytes (1-8, little-endian, zero-extended) at `addr` when they lie inside `w`;
// nothing else is ever read. The one stack read of the expression evaluator and the unwinder.
bool read_stack_window(const StackWindow& w, uint64_t addr, uint32_t size, uint64_t* out);

// Evaluate a DWARF expression of call-frame information over the register file `regs`
// (kCfiRegs entries; bit n of `valid` says regs[n] is known): breg/bregx, literals and
// constants, plus/minus/and/or/xor/shl/shr/shra/mul/div/mod/abs/ge/gt/le/lt/eq/ne/plus_uconst/
// dup/drop/swap/over/pick/rot/not/neg, and deref/deref_size of words inside `stack` only (an
// address outside it -> kUnsupported, nothing read). `push_first` (DW_CFA_expression and
// val_expression: the CFA) is pushed before the block runs. Bounded stack (16) and steps.
CfiResult eval_cfi_expression(const uint8_t* expr, uint32_t len, const uint64_t* regs, uint64_t valid,
                              const StackWindow& stack, const uint64_t* push_first, uint64_t* out);
// The same with no memory to read (a deref -> kUnsupported) and nothing pushed first.
CfiResult eval_cfa_expression(const uint8_t* expr, uint32_t len, const uint64_t* regs,
                              uint64_t valid, uint64_t* out);

// A module's .eh_frame_hdr: the binary-search table lives in the mapped image.
struct EhFrameHdr {
    uintptr_t hdr = 0;               // address of .eh_frame_hdr (the datarel base)
    uintptr_t eh_frame = 0;          // address of .eh_frame
    const uint8_t* table = nullptr;  // fde_count pairs of int32 {initial pc, FDE}, datarel
    uint32_t fde_count = 0;
};

// Parse the header at `hdr`, checking that the whole table lies inside `range` (the segment
// holding PT_GNU_EH_FRAME). Only the table encoding every ELF linker emits (datarel|sdata4)
// is supported; others -> kUnsupported (the module then has no CFI: frame-pointer fallback).
CfiResult parse_eh_frame_hdr(const uint8_t* hdr, const ByteRange& range, EhFrameHdr* out);

// Find and parse the FDE covering `pc`: binary search of the table, then the FDE's own range
// check. `cfi_range` bounds the FDE/CIE reads (the segment holding .eh_frame).
CfiResult find_fde(const EhFrameHdr& hdr, const ByteRange& cfi_range, uint64_t pc, Fde* out);

}  // namespace spprof
