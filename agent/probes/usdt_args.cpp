#include "probes/usdt_args.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace vigil::agent {
namespace {

// The x86-64 register names libbpf maps to pt_regs (calc_pt_regs_off): 64-, 32-, 16- and 8-bit.
constexpr std::string_view kRegisters[] = {
    "rip", "eip", "rax", "eax", "ax", "al", "rbx", "ebx", "bx", "bl", "rcx", "ecx", "cx", "cl",
    "rdx", "edx", "dx", "dl", "rsi", "esi", "si", "sil", "rdi", "edi", "di", "dil", "rbp", "ebp",
    "bp", "bpl", "rsp", "esp", "sp", "spl", "r8", "r8d", "r8w", "r8b", "r9", "r9d", "r9w", "r9b",
    "r10", "r10d", "r10w", "r10b", "r11", "r11d", "r11w", "r11b", "r12", "r12d", "r12w", "r12b",
    "r13", "r13d", "r13w", "r13b", "r14", "r14d", "r14w", "r14b", "r15", "r15d", "r15w", "r15b"};

bool known_register(std::string_view r) {
  for (auto k : kRegisters)
    if (k == r) return true;
  return false;
}

// A decimal integer filling all of TEXT (one optional sign, then digits).
bool integer(std::string_view text, int64_t* out) {
  const bool plus = !text.empty() && text.front() == '+';
  if (plus) text.remove_prefix(1);
  if (text.empty() || (plus && text.front() == '-')) return false;  // from_chars takes one '-' only
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// "%name" -> name, when it is a register libbpf knows.
bool register_operand(std::string_view text, std::string* reg, std::string* why) {
  if (text.size() < 2 || text.front() != '%') {
    *why = "expected a register like %rax";
    return false;
  }
  text.remove_prefix(1);
  if (!known_register(text)) {
    *why = "register " + quoted_note_text(text) + " is not one libbpf reads";
    return false;
  }
  reg->assign(text);
  return true;
}

bool parse_one(std::string_view spec, UsdtArg* arg, std::string* why) {
  const size_t at = spec.find('@');
  int64_t size = 0;
  if (at == std::string_view::npos || !integer(spec.substr(0, at), &size)) {
    *why = "expected SIZE@OPERAND";
    return false;
  }
  if (size != 1 && size != 2 && size != 4 && size != 8 && size != -1 && size != -2 && size != -4 && size != -8) {
    *why = "size " + std::to_string(size) + " is not 1, 2, 4 or 8 bytes";
    return false;
  }
  arg->size = static_cast<int>(size);
  std::string_view op = spec.substr(at + 1);
  if (!op.empty() && op.front() == '$') {
    arg->kind = UsdtArg::Kind::kConstant;
    if (!integer(op.substr(1), &arg->value)) {
      *why = "constant " + quoted_note_text(op) + " is not a decimal integer";
      return false;
    }
    return true;
  }
  if (!op.empty() && op.front() == '%') {
    arg->kind = UsdtArg::Kind::kRegister;
    return register_operand(op, &arg->reg, why);
  }
  // OFFSET(%reg) or (%reg); scaled-index forms (-96(%rbp,%rax,8)) are not in libbpf 1.1.
  const size_t open = op.find('(');
  if (open == std::string_view::npos || op.back() != ')') {
    *why = "expected %REG, $CONSTANT or OFFSET(%REG)";
    return false;
  }
  arg->kind = UsdtArg::Kind::kMemory;
  if (open > 0 && !integer(op.substr(0, open), &arg->value)) {
    *why = "offset " + quoted_note_text(op.substr(0, open)) + " is not a decimal integer";
    return false;
  }
  return register_operand(op.substr(open + 1, op.size() - open - 2), &arg->reg, why);
}

}  // namespace

std::string quoted_note_text(std::string_view text) {
  // The workload wrote these bytes: printable ASCII as is, the rest as \xNN, at most 64 of them,
  // so a refusal cannot forge or flood the agent's log.
  constexpr size_t kMax = 64;
  std::string out = "'";
  for (size_t i = 0; i < std::min(text.size(), kMax); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (text.size() > kMax) out += "...";
  return out + "'";
}

UsdtArgs parse_usdt_args(std::string_view text) {
  UsdtArgs out;
  size_t i = 0;
  while (true) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i == text.size()) break;
    const size_t end = std::min(text.find(' ', i), text.size());
    const std::string_view spec = text.substr(i, end - i);
    i = end;
    if (static_cast<int>(out.args.size()) == kMaxUsdtArgs) {
      out.error = "more than " + std::to_string(kMaxUsdtArgs) + " arguments";
      break;
    }
    UsdtArg arg;
    std::string why;
    if (!parse_one(spec, &arg, &why)) {
      out.error = "argument " + std::to_string(out.args.size() + 1) + " " + quoted_note_text(spec) + ": " + why;
      break;
    }
    out.args.push_back(std::move(arg));
  }
  if (!out.error.empty()) out.args.clear();
  return out;
}

}  // namespace vigil::agent
