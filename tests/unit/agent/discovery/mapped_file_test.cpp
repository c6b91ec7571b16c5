// Opening a mapped file: only a regular file with the expected (device, inode), never blocking,
// and the handle keeps reaching that inode whatever happens to its name.
#include "discovery/mapped_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace vigil::agent {
namespace {

namespace fs = std::filesystem;

class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vigil_mapped_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static struct stat stat_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(stat(p.c_str(), &st), 0);
    return st;
  }
  static std::string read_all(const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_;
};

TEST_F(MappedFileTest, OpensTheExpectedRegularFile) {
  fs::path lib = dir_ / "libcuda.so.1";
  std::ofstream(lib) << "first";
  struct stat st = stat_of(lib);
  Refusal why = Refusal::kOpenFailed;
  MappedFile f = open_mapped_file(lib.string(), st.st_dev, st.st_ino, why);
  ASSERT_TRUE(f.is_open());
  EXPECT_EQ(why, Refusal::kNone);
  EXPECT_EQ(f.path(), "/proc/self/fd/" + std::to_string(f.fd()));
  EXPECT_EQ(stat_of(f.path()).st_ino, st.st_ino);
  // A rename over the name afterwards (the race between libbpf's parse and the kernel's attach):
  // the handle's path still reaches the file that was checked.
  fs::path other = dir_ / "other";
  std::ofstream(other) << "second";
  fs::rename(other, lib);
  EXPECT_EQ(read_all(f.path()), "first");
  EXPECT_EQ(stat_of(f.path()).st_ino, st.st_ino);
}

TEST_F(MappedFileTest, AFifoIsRefusedWithoutBlocking) {
  fs::path fifo = dir_ / "libcuda.so.1";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);  // no writer: a plain open() would wait for ever
  struct stat st = stat_of(fifo);
  auto start = std::chrono::steady_clock::now();
  Refusal why = Refusal::kNone;
  MappedFile f = open_mapped_file(fifo.string(), st.st_dev, st.st_ino, why);
  EXPECT_FALSE(f.is_open());
  EXPECT_EQ(why, Refusal::kNotRegular);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST_F(MappedFileTest, ADirectoryOrDeviceIsRefused) {
  Refusal why = Refusal::kNone;
  struct stat st = stat_of(dir_);
  EXPECT_FALSE(open_mapped_file(dir_.string(), st.st_dev, st.st_ino, why).is_open());
  EXPECT_EQ(why, Refusal::kNotRegular);
  st = stat_of("/dev/null");
  EXPECT_FALSE(open_mapped_file("/dev/null", st.st_dev, st.st_ino, why).is_open());
  EXPECT_EQ(why, Refusal::kNotRegular);
}

TEST_F(MappedFileTest, AnotherInodeIsRefused) {
  fs::path lib = dir_ / "libcuda.so.1";
  std::ofstream(lib) << "x";
  struct stat st = stat_of(lib);
  Refusal why = Refusal::kNone;
  EXPECT_FALSE(open_mapped_file(lib.string(), st.st_dev, st.st_ino + 1, why).is_open());
  EXPECT_EQ(why, Refusal::kInodeMismatch);
  EXPECT_FALSE(open_mapped_file(lib.string(), st.st_dev + 1, st.st_ino, why).is_open());
  EXPECT_EQ(why, Refusal::kInodeMismatch);
}

TEST_F(MappedFileTest, AMissingFileIsGone) {
  Refusal why = Refusal::kNone;
  EXPECT_FALSE(open_mapped_file((dir_ / "none").string(), 1, 1, why).is_open());
  EXPECT_EQ(why, Refusal::kGone);
}

TEST_F(MappedFileTest, MovingAHandleMovesItsFile) {
  fs::path lib = dir_ / "lib";
  std::ofstream(lib) << "x";
  struct stat st = stat_of(lib);
  Refusal why = Refusal::kNone;
  MappedFile a = open_mapped_file(lib.string(), st.st_dev, st.st_ino, why);
  int fd = a.fd();
  MappedFile b = std::move(a);
  EXPECT_FALSE(a.is_open());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(b.fd(), fd);
  b = MappedFile();
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // closed
}

}  // namespace
}  // namespace vigil::agent
