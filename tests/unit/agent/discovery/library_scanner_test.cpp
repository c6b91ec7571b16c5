// /proc/PID/maps parsing: executable mappings of probed libraries only, deleted files flagged.
#include "discovery/library_scanner.h"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

TEST(LibraryScanner, KeepsExecutableProbedLibraries) {
  auto entries = parse_maps(
      "7f00-7f10 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.550.1\n"
      "7f10-7f20 r-xp 00010000 08:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.550.1\n"
      "7f20-7f30 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n"
      "7f30-7f40 r-xp 00000000 00:2a 77 /opt/venv/nvidia/nccl/lib/libnccl.so.2 (deleted)\n"
      "7f40-7f50 rw-p 00000000 00:00 0 [heap]\n");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].kind, LibraryKind::kCuda);
  EXPECT_EQ(entries[0].range, "7f10-7f20");
  EXPECT_FALSE(entries[0].deleted);
  EXPECT_EQ(entries[1].kind, LibraryKind::kNccl);
  EXPECT_EQ(entries[1].path, "/opt/venv/nvidia/nccl/lib/libnccl.so.2");
  EXPECT_TRUE(entries[1].deleted);
}

TEST(LibraryScanner, UsdtCarriers) {
  auto entries = parse_maps(
      "1000-2000 r-xp 00000000 08:01 5 /venv/torch/lib/libc10_cuda.so\n"
      "2000-3000 r-xp 00000000 08:01 6 /usr/local/bin/vigil-worker\n"
      "3000-4000 r-xp 00000000 08:01 7 /usr/bin/python3.11\n");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].kind, LibraryKind::kUsdt);
  EXPECT_EQ(entries[1].kind, LibraryKind::kUsdt);
}

TEST(LibraryScanner, PathsWithSpaces) {
  auto entries = parse_maps("1000-2000 r-xp 00000000 08:01 5 /opt/my dir/libcuda.so.1\n");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].path, "/opt/my dir/libcuda.so.1");
}

}  // namespace
}  // namespace vigil::agent
