// Library discovery on a fake /proc tree: executable mappings of probed libraries, one per
// (device, inode), each opened once through its map_files link (here a plain symlink to a real
// file) and only when it is the file its maps line names; refusals are counted by reason.
#include "discovery/library_scanner.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "stats/agent_stats.h"

namespace vigil::agent {
namespace {

namespace fs = std::filesystem;

class LibraryScannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("vigil_scan_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_ / "files");
  }
  void TearDown() override { fs::remove_all(root_); }

  // A real file for a fake process to map; returns its maps "dev inode" fields.
  std::string file(const std::string& name) {
    fs::path p = root_ / "files" / name;
    std::ofstream(p) << name;
    return dev_ino(p);
  }
  static std::string dev_ino(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(stat(p.c_str(), &st), 0);
    std::ostringstream s;
    s << std::hex << major(st.st_dev) << ":" << minor(st.st_dev) << std::dec << " " << st.st_ino;
    return s.str();
  }
  // Process PID's maps (one line per mapping: range, perms, "dev inode", path) and its map_files
  // links, each to TARGET (a name under files/).
  struct Mapping {
    std::string range, perms, dev_ino, path, target;
  };
  void process(uint32_t pid, const std::vector<Mapping>& mappings) {
    fs::path dir = root_ / std::to_string(pid);
    fs::create_directories(dir / "map_files");
    std::ofstream maps(dir / "maps");
    for (const auto& m : mappings) {
      maps << m.range << " " << m.perms << " 00000000 " << m.dev_ino << " " << m.path << "\n";
      if (!m.target.empty()) fs::create_symlink(root_ / "files" / m.target, dir / "map_files" / m.range);
    }
  }
  uint64_t refused(const std::string& reason) {
    auto s = stats_.snapshot().discovery_refused;
    return s.count(reason) ? s.at(reason) : 0;
  }

  fs::path root_;
  AgentStats stats_;
};

TEST_F(LibraryScannerTest, KeepsExecutableProbedLibrariesOncePerFile) {
  std::string cuda = file("libcuda.so.550.1"), nccl = file("libnccl.so.2"), libc = file("libc.so.6");
  fs::path maps = root_ / "maps";
  std::ofstream(maps) << "7f00-7f10 r--p 00000000 " << cuda << " /usr/lib/libcuda.so.550.1\n"
                      << "7f10-7f20 r-xp 00010000 " << cuda << " /usr/lib/libcuda.so.550.1\n"
                      << "7f18-7f19 r-xp 00020000 " << cuda << " /usr/lib/libcuda.so.550.1\n"
                      << "7f20-7f30 r-xp 00000000 " << libc << " /usr/lib/libc.so.6\n"
                      << "7f30-7f40 r-xp 00000000 " << nccl << " /opt/venv/nccl/lib/libnccl.so.2 (deleted)\n"
                      << "7f40-7f50 rw-p 00000000 00:00 0 [heap]\n"
                      << "7f50-7f60 r-xp 00000000 08:01 5 /venv/torch/lib/libc10_cuda.so\n"
                      << "7f60-7f70 r-xp 00000000 08:01 6 /usr/local/bin/vigil-worker\n"
                      << "7f70-7f80 r-xp 00000000 08:01 7 /opt/my dir/libcuda.so.1\n";
  ProcessMaps p = probed_mappings(maps.string(), kScanLimits);
  EXPECT_TRUE(p.opened);
  EXPECT_FALSE(p.truncated);
  ASSERT_EQ(p.entries.size(), 5u);
  EXPECT_EQ(p.entries[0].kind, LibraryKind::kCuda);
  EXPECT_EQ(p.entries[0].range, "7f10-7f20");
  struct stat st {};
  ASSERT_EQ(stat((root_ / "files" / "libcuda.so.550.1").c_str(), &st), 0);
  EXPECT_EQ(p.entries[0].dev, st.st_dev);
  EXPECT_EQ(p.entries[0].inode, st.st_ino);
  EXPECT_EQ(p.entries[1].kind, LibraryKind::kNccl);
  EXPECT_EQ(p.entries[1].path, "/opt/venv/nccl/lib/libnccl.so.2");
  EXPECT_TRUE(p.entries[1].deleted);
  EXPECT_EQ(p.entries[2].kind, LibraryKind::kUsdt);
  EXPECT_EQ(p.entries[3].kind, LibraryKind::kUsdt);
  EXPECT_EQ(p.entries[4].path, "/opt/my dir/libcuda.so.1");
}

TEST_F(LibraryScannerTest, LimitsPerProcess) {
  fs::path maps = root_ / "maps";
  {
    std::ofstream out(maps);
    for (int i = 0; i < 100; ++i) out << 0x1000 * i << "-" << 0x1000 * i + 1 << " r-xp 00000000 08:01 " << i + 1
                                      << " /lib/libcuda.so." << i << "\n";
  }
  ProcessMaps few_files = probed_mappings(maps.string(), {{1000, 1u << 20}, 10, 256});
  EXPECT_EQ(few_files.entries.size(), 10u);
  EXPECT_TRUE(few_files.too_many_files);
  EXPECT_FALSE(few_files.truncated);
  ProcessMaps few_lines = probed_mappings(maps.string(), {{30, 1u << 20}, 64, 256});
  EXPECT_EQ(few_lines.entries.size(), 30u);
  EXPECT_TRUE(few_lines.truncated);
  EXPECT_FALSE(few_lines.too_many_files);
}

TEST_F(LibraryScannerTest, OpensEachFileOnceThroughMapFiles) {
  std::string cuda = file("libcuda.so.1");
  // Two processes map the same file; the path each shows is only a name (the second's is a
  // name that exists nowhere): the map_files link is what gets opened.
  process(100, {{"1000-2000", "r-xp", cuda, "/usr/lib/libcuda.so.1", "libcuda.so.1"}});
  process(200, {{"3000-4000", "r-xp", cuda, "/jail/nowhere/libcuda.so.1", "libcuda.so.1"}});
  LibraryScanner scanner(root_.string(), &stats_);
  LibraryScanner::Result r;
  scanner.scan(0, r);
  ASSERT_EQ(r.opened.size(), 1u);
  ASSERT_EQ(r.mapped.size(), 1u);
  const LibraryHit& hit = r.opened[0];
  EXPECT_EQ(hit.kind, LibraryKind::kCuda);
  EXPECT_TRUE(hit.name.ends_with("/map_files/1000-2000 -> /usr/lib/libcuda.so.1") ||
              hit.name.ends_with("/map_files/3000-4000 -> /jail/nowhere/libcuda.so.1"));
  struct stat st {};
  ASSERT_EQ(stat(hit.file.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, hit.inode);
  // Handed out once: the next scans find it mapped but open nothing, until no process maps it.
  LibraryScanner::Result again;
  scanner.scan(0, again);
  EXPECT_TRUE(again.opened.empty());
  EXPECT_EQ(again.mapped.size(), 1u);
  scanner.retain({});
  LibraryScanner::Result after_unmap;
  scanner.scan(0, after_unmap);
  EXPECT_EQ(after_unmap.opened.size(), 1u);
  for (const char* reason : {"not_regular", "inode_mismatch", "open_failed", "maps_too_large"})
    EXPECT_EQ(refused(reason), 0u) << reason;
}

TEST_F(LibraryScannerTest, RefusesWhatTheMapsLineDoesNotName) {
  std::string cuda = file("libcuda.so.1"), other = file("libnccl.so.2");
  ASSERT_EQ(mkfifo((root_ / "files" / "fifo").c_str(), 0600), 0);
  // A link to a FIFO, a link to another file than the line's inode, a link that is gone.
  process(100, {{"1000-2000", "r-xp", dev_ino(root_ / "files" / "fifo"), "/lib/libcuda.so.1", "fifo"}});
  process(200, {{"3000-4000", "r-xp", cuda, "/lib/libcuda.so.1", "libnccl.so.2"}});
  process(300, {{"5000-6000", "r-xp", other, "/lib/libnccl.so.2", ""}});
  LibraryScanner scanner(root_.string(), &stats_);
  LibraryScanner::Result r;
  scanner.scan(0, r);
  EXPECT_TRUE(r.opened.empty());
  EXPECT_EQ(refused("not_regular"), 1u);
  EXPECT_EQ(refused("inode_mismatch"), 1u);
  EXPECT_EQ(refused("open_failed"), 0u);  // a vanished mapping is a race, not a refusal
  // Refused files are tried again on the next scan (and counted again).
  scanner.scan(0, r);
  EXPECT_EQ(refused("not_regular"), 2u);
}

TEST_F(LibraryScannerTest, CountsMapsPastTheLimit) {
  std::string cuda = file("libcuda.so.1");
  std::vector<Mapping> many;
  for (int i = 0; i < 50; ++i) many.push_back({std::to_string(i) + "-" + std::to_string(i + 1), "r--p", "08:01 9", "/data", ""});
  many.push_back({"9000-a000", "r-xp", cuda, "/lib/libcuda.so.1", "libcuda.so.1"});
  process(100, many);
  LibraryScanner scanner(root_.string(), &stats_, {{20, 1u << 20}, 64, 256});
  LibraryScanner::Result r;
  scanner.scan(100, r);
  EXPECT_TRUE(r.opened.empty());  // the library lies past the limit
  EXPECT_EQ(refused("maps_too_large"), 1u);
}

TEST_F(LibraryScannerTest, OpensAtMostTheLimitPerScanAndTheRestLater) {
  std::vector<Mapping> libs;
  for (int i = 0; i < 5; ++i) {
    std::string name = "libcuda.so." + std::to_string(i);
    libs.push_back({std::to_string(i + 1) + "000-" + std::to_string(i + 1) + "fff", "r-xp", file(name), "/lib/" + name, name});
  }
  process(100, libs);
  LibraryScanner scanner(root_.string(), &stats_, {{1000, 1u << 20}, 64, 2});
  size_t total = 0;
  for (int scan = 0; scan < 3; ++scan) {
    LibraryScanner::Result r;
    scanner.scan(0, r);
    EXPECT_LE(r.opened.size(), 2u);
    EXPECT_EQ(r.mapped.size(), 5u);
    total += r.opened.size();
  }
  EXPECT_EQ(total, 5u);
}

}  // namespace
}  // namespace vigil::agent
