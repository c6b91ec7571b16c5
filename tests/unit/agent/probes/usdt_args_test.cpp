// The agent's reading of USDT argument specs, on the forms compilers emit and libbpf reads on
// x86-64 (src/usdt.c: parse_usdt_arg, calc_pt_regs_off), including those of PyTorch's own
// pytorch:malloc (libc10_cuda.so of torch 2.15.0: "-8@%rbp -1@%al -8@%r12 -8@56(%rsp)").
#include "probes/usdt_args.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

TEST(UsdtArgs, ReadsPyTorchsMallocSpecs) {
  for (const char* text : {"-8@%rbp -1@%al -8@%r12 -8@56(%rsp)", "-8@%rax -1@%dl -8@%r14 -8@-56(%rbp)"}) {
    const UsdtArgs a = parse_usdt_args(text);
    ASSERT_EQ(a.error, "") << text;
    ASSERT_EQ(a.args.size(), 4u) << text;
    EXPECT_EQ(a.args[0].size, -8);
    EXPECT_EQ(a.args[1].size, -1);
    EXPECT_EQ(a.args[1].kind, UsdtArg::Kind::kRegister);
    EXPECT_EQ(a.args[3].kind, UsdtArg::Kind::kMemory);
  }
  const UsdtArgs a = parse_usdt_args("-8@%rax -1@%dl -8@%r14 -8@-56(%rbp)");
  EXPECT_EQ(a.args[1].reg, "dl");
  EXPECT_EQ(a.args[3].reg, "rbp");
  EXPECT_EQ(a.args[3].value, -56);
}

TEST(UsdtArgs, ReadsEveryOperandForm) {
  const UsdtArgs a = parse_usdt_args("8@%rdi 4@%r9d -2@%r15w 1@%sil 8@(%rsp) 4@+16(%rbx) -4@$71 8@$-3 8@%rip");
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(a.args.size(), 9u);
  EXPECT_EQ(a.args[4].kind, UsdtArg::Kind::kMemory);
  EXPECT_EQ(a.args[4].value, 0);
  EXPECT_EQ(a.args[5].value, 16);
  EXPECT_EQ(a.args[6].kind, UsdtArg::Kind::kConstant);
  EXPECT_EQ(a.args[6].value, 71);
  EXPECT_EQ(a.args[7].value, -3);
  EXPECT_TRUE(parse_usdt_args("").args.empty());
  EXPECT_EQ(parse_usdt_args("").error, "");
  EXPECT_EQ(parse_usdt_args("  8@%rdi  ").args.size(), 1u);
}

TEST(UsdtArgs, RefusesWhatLibbpfCouldNotReadNamingTheArgument) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : {
           Case{"-8@%rdi -8@%rzz", "argument 2 '-8@%rzz': register 'rzz' is not one libbpf reads"},
           Case{"3@%rax", "argument 1 '3@%rax': size 3 is not 1, 2, 4 or 8 bytes"},
           Case{"8%rax", "argument 1 '8%rax': expected SIZE@OPERAND"},
           Case{"x@%rax", "argument 1 'x@%rax': expected SIZE@OPERAND"},
           Case{"8@rax", "argument 1 '8@rax': expected %REG, $CONSTANT or OFFSET(%REG)"},
           Case{"8@0x10(%rax)", "argument 1 '8@0x10(%rax)': offset '0x10' is not a decimal integer"},
           Case{"8@$0x10", "argument 1 '8@$0x10': constant '$0x10' is not a decimal integer"},
           Case{"8@-96(%rbp,%rax,8)", "argument 1 '8@-96(%rbp,%rax,8)': register 'rbp,%rax,8' is not one libbpf reads"},
           Case{"8@(%)", "argument 1 '8@(%)': expected a register like %rax"},
           Case{"+-8@%rax", "argument 1 '+-8@%rax': expected SIZE@OPERAND"},
           Case{"8@$+-3", "argument 1 '8@$+-3': constant '$+-3' is not a decimal integer"},
           Case{"8@--8(%rbp)", "argument 1 '8@--8(%rbp)': offset '--8' is not a decimal integer"},
           Case{"8@%r\n9", "argument 1 '8@%r\\x0a9': register 'r\\x0a9' is not one libbpf reads"},
           Case{"8@99999999999999999999(%rax)",
                "argument 1 '8@99999999999999999999(%rax)': offset '99999999999999999999' is not a decimal integer"},
       }) {
    const UsdtArgs a = parse_usdt_args(c.text);
    EXPECT_EQ(a.error, c.error) << c.text;
    EXPECT_TRUE(a.args.empty()) << c.text;
  }
}

TEST(UsdtArgs, ErrorsQuoteTheWorkloadsBytesEscapedAndCut) {
  // A note is the workload's: its bytes reach the agent's log only escaped and at most 64 long.
  const std::string long_register = "8@%" + std::string(1000, 'q');
  const std::string e = parse_usdt_args(long_register).error;
  EXPECT_EQ(e, "argument 1 '8@%" + std::string(61, 'q') + "...': register '" + std::string(64, 'q') +
                   "...' is not one libbpf reads");
  EXPECT_EQ(quoted_note_text("a'b\\c\x1b[31m\xff"), "'a\\x27b\\x5cc\\x1b[31m\\xff'");
}

TEST(UsdtArgs, RefusesMoreArgumentsThanLibbpfHolds) {
  std::string twelve, thirteen;
  for (int i = 0; i < kMaxUsdtArgs; ++i) twelve += "8@%rax ";
  thirteen = twelve + "8@%rbx";
  EXPECT_EQ(parse_usdt_args(twelve).args.size(), 12u);
  EXPECT_EQ(parse_usdt_args(thirteen).error, "more than 12 arguments");
}

}  // namespace
}  // namespace vigil::agent
