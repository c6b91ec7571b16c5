// The argument specs of a USDT note ("-8@%rbp -1@%al -8@%r12 -8@56(%rsp)"), read as libbpf reads
// them on x86-64 before it builds a spec for the BPF side (libbpf src/usdt.c: parse_usdt_arg,
// calc_pt_regs_off): SIZE@OPERAND, SIZE one of ±1, ±2, ±4, ±8 (negative: signed), OPERAND a
// register (%rax, %eax, %ax, %al ... %r15b, %rip), a register plus an offset (-56(%rbp), (%rsp)) or
// a constant ($71). A workload controls the notes: the agent vets them itself and refuses a file
// whose notes it cannot read, naming the argument, rather than leave the error to libbpf's log.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vigil::agent {

// libbpf's limit on arguments per probe (USDT_MAX_ARG_CNT).
inline constexpr int kMaxUsdtArgs = 12;

struct UsdtArg {
  enum class Kind { kRegister, kMemory, kConstant };
  Kind kind = Kind::kRegister;
  int size = 0;          // bytes, negative when signed
  std::string reg;       // kRegister, kMemory: the register's name without '%'
  int64_t value = 0;     // kMemory: the offset from reg; kConstant: the value
};

struct UsdtArgs {
  std::vector<UsdtArg> args;
  std::string error;  // empty when every argument is readable
};

// Parses a note's argument string (empty: no arguments). Errors quote the note's bytes with
// quoted_note_text.
UsdtArgs parse_usdt_args(std::string_view text);

// TEXT from a workload's note, quoted for a log line: '...', bytes outside printable ASCII (and
// the quote and backslash) as \xNN, at most 64 bytes then "...".
std::string quoted_note_text(std::string_view text);

}  // namespace vigil::agent
