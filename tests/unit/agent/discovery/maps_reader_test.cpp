// /proc/PID/maps lines (device as hex major:minor, inode) and the streaming reader's limits.
#include "discovery/maps_reader.h"

#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace vigil::agent {
namespace {

namespace fs = std::filesystem;

TEST(MapsLine, DeviceAndInode) {
  MapsLine l;
  ASSERT_TRUE(parse_maps_line("7f10-7f20 r-xp 00010000 fd:01 1234567 /usr/lib/libcuda.so.1", l));
  EXPECT_EQ(l.range, "7f10-7f20");
  EXPECT_EQ(l.perms, "r-xp");
  EXPECT_EQ(l.dev, makedev(0xfd, 0x01));
  EXPECT_EQ(l.inode, 1234567u);
  EXPECT_EQ(l.path, "/usr/lib/libcuda.so.1");
  // Majors and minors past 255 print with more hex digits (MAJOR/MINOR of a 32-bit dev_t).
  ASSERT_TRUE(parse_maps_line("1000-2000 r-xp 00000000 103:1a2 18446744073709551615 /x", l));
  EXPECT_EQ(l.dev, makedev(0x103, 0x1a2));
  EXPECT_EQ(l.inode, static_cast<ino_t>(18446744073709551615ull));
}

TEST(MapsLine, PathsWithSpacesAndNone) {
  MapsLine l;
  ASSERT_TRUE(parse_maps_line("1000-2000 r-xp 00000000 08:01 5                          /opt/my dir/libcuda.so.1", l));
  EXPECT_EQ(l.path, "/opt/my dir/libcuda.so.1");
  ASSERT_TRUE(parse_maps_line("7ffd-7ffe rw-p 00000000 00:00 0", l));
  EXPECT_TRUE(l.path.empty());
  EXPECT_EQ(l.inode, 0u);
}

TEST(MapsLine, RefusesWhatTheKernelDoesNotWrite) {
  MapsLine l;
  EXPECT_FALSE(parse_maps_line("", l));
  EXPECT_FALSE(parse_maps_line("garbage", l));
  EXPECT_FALSE(parse_maps_line("1000-2000 r-xp 00000000 zz:01 5 /x", l));
  EXPECT_FALSE(parse_maps_line("1000-2000 r-xp 00000000 0801 5 /x", l));
  EXPECT_FALSE(parse_maps_line("1000-2000 r-xp 00000000 08:01 5x /x", l));
  EXPECT_FALSE(parse_maps_line("1000-2000 r-xp 00000000 08:01 -5 /x", l));
  EXPECT_FALSE(parse_maps_line("1000 r-xp 00000000 08:01 5 /x", l));
}

class MapsReader : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("vigil_maps_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
  static std::string line(int i) {
    return std::to_string(0x1000 * i) + "-" + std::to_string(0x1000 * i + 0x1000) + " r-xp 00000000 08:01 " +
           std::to_string(i + 1) + " /lib/libcuda.so." + std::to_string(i) + "\n";
  }
  MapsReadResult read(const MapsLimits& limits) {
    inodes_.clear();
    return read_maps(path_.string(), limits, [this](const MapsLine& l) { inodes_.push_back(l.inode); });
  }
  fs::path path_;
  std::vector<ino_t> inodes_;
};

TEST_F(MapsReader, WholeFileUnderTheLimits) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += line(i);  // several buffers' worth
  write(text);
  MapsReadResult r = read({100000, 1u << 30});
  EXPECT_TRUE(r.opened);
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(r.lines, 5000u);
  EXPECT_EQ(r.bytes, text.size());
  ASSERT_EQ(inodes_.size(), 5000u);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(inodes_[i], static_cast<ino_t>(i + 1));
}

TEST_F(MapsReader, StopsAtTheLineLimit) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += line(i);
  write(text);
  MapsReadResult r = read({100, 1u << 30});
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.lines, 100u);
  EXPECT_EQ(inodes_.size(), 100u);
  EXPECT_EQ(inodes_.back(), 100u);
}

TEST_F(MapsReader, StopsAtTheByteLimit) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += line(i);
  write(text);
  uint64_t limit = 5;  // ten whole lines and part of the eleventh
  for (int i = 0; i < 10; ++i) limit += line(i).size();
  MapsReadResult r = read({100000, limit});
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.bytes, limit);
  EXPECT_EQ(inodes_.size(), 10u);
}

TEST_F(MapsReader, AFileEndingAtTheLimitIsWhole) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += line(i);
  write(text);
  EXPECT_FALSE(read({10, 1u << 30}).truncated);
  EXPECT_FALSE(read({100, text.size()}).truncated);
  EXPECT_EQ(inodes_.size(), 10u);
}

TEST_F(MapsReader, ALineLongerThanTheBufferIsSkipped) {
  write(line(0) + "2000-3000 r-xp 00000000 08:01 77 /" + std::string(200000, 'a') + "\n" + line(2));
  MapsReadResult r = read({100, 1u << 30});
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(r.lines, 3u);
  EXPECT_EQ(inodes_, (std::vector<ino_t>{1, 3}));
}

TEST_F(MapsReader, AMissingFileIsNotOpened) {
  MapsReadResult r = read({100, 1000});
  EXPECT_FALSE(r.opened);
  EXPECT_TRUE(inodes_.empty());
}

}  // namespace
}  // namespace vigil::agent
