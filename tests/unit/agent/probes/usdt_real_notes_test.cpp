// The agent's note reader on PyTorch's own libc10_cuda.so (torch 2.15.0 from PyPI, fetched and
// verified by scripts/fetch_nvidia_libs.py: the nvidia_libs test fixture): the same sites,
// addresses, semaphores and argument strings as binutils' readelf; every argument spec of
// pytorch:malloc and pytorch:free read with PyTorch's types (c10/cuda/CUDACachingAllocator.cpp:
// pointer, int8 device, size, int64 stream; free: pointer); and a copy with one register renamed
// refused, naming the site and the argument.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "probes/usdt_args.h"
#include "probes/usdt_notes.h"

namespace vigil::agent {
namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

std::string real_library() {
  std::string dir = run("python3 " VIGIL_SOURCE_DIR "/scripts/fetch_nvidia_libs.py --verify-only");
  while (!dir.empty() && dir.back() == '\n') dir.pop_back();
  return dir.empty() ? dir : dir + "/libc10_cuda.so";
}

// PATH's stapsdt notes as readelf -n prints them.
std::vector<UsdtNote> readelf_notes(const std::string& path) {
  const std::string text = run("readelf -n " + path);
  static const std::regex note(
      R"(Provider: (\S+)\s+Name: (\S+)\s+Location: (0x[0-9a-f]+), Base: 0x[0-9a-f]+, Semaphore: (0x[0-9a-f]+)\s+Arguments: ([^\n]*))");
  std::vector<UsdtNote> out;
  for (std::sregex_iterator it(text.begin(), text.end(), note), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.push_back({m[1].str() + ":" + m[2].str(), std::stoull(m[3].str(), nullptr, 16),
                   std::stoull(m[4].str(), nullptr, 16), m[5].str()});
  }
  return out;
}

TEST(UsdtRealNotes, PyTorchsLibc10CudaReadsAsReadelfReadsIt) {
  const std::string path = real_library();
  ASSERT_FALSE(path.empty()) << "scripts/fetch_nvidia_libs.py --verify-only found no libraries";
  const UsdtNotes mine = read_usdt_notes(path);
  ASSERT_EQ(mine.error, "");
  const std::vector<UsdtNote> theirs = readelf_notes(path);
  ASSERT_EQ(mine.notes.size(), theirs.size());
  std::map<std::string, int> pytorch;
  for (size_t i = 0; i < theirs.size(); ++i) {
    EXPECT_EQ(mine.notes[i].probe, theirs[i].probe) << i;
    EXPECT_EQ(mine.notes[i].location, theirs[i].location) << i;
    EXPECT_EQ(mine.notes[i].semaphore, theirs[i].semaphore) << i;
    EXPECT_EQ(mine.notes[i].args, theirs[i].args) << i;
    if (theirs[i].probe.rfind("pytorch:", 0) != 0) continue;
    ++pytorch[theirs[i].probe];
    const UsdtArgs a = parse_usdt_args(mine.notes[i].args);
    ASSERT_EQ(a.error, "") << mine.notes[i].args;
    std::vector<int> sizes;
    for (const UsdtArg& arg : a.args) sizes.push_back(arg.size);
    const std::vector<int> want = theirs[i].probe == "pytorch:malloc" ? std::vector<int>{-8, -1, -8, -8} : std::vector<int>{-8};
    EXPECT_EQ(sizes, want) << theirs[i].probe << " " << mine.notes[i].args;
  }
  EXPECT_GE(pytorch["pytorch:malloc"], 1);
  EXPECT_GE(pytorch["pytorch:free"], 1);
  const UsdtSites sites = usdt_sites(path, {"pytorch:malloc", "pytorch:free"}, kMaxUsdtSitesPerFile);
  EXPECT_EQ(sites.refused, "");
  EXPECT_EQ(sites.sites, pytorch["pytorch:malloc"] + pytorch["pytorch:free"]);
  std::printf("%s: pytorch:malloc at %d sites, pytorch:free at %d, every argument read\n", path.c_str(),
              pytorch["pytorch:malloc"], pytorch["pytorch:free"]);
}

TEST(UsdtRealNotes, ACopyWithARegisterRenamedIsRefusedNamingTheArgument) {
  const std::string path = real_library();
  ASSERT_FALSE(path.empty());
  const UsdtNotes notes = read_usdt_notes(path);
  const UsdtNote* malloc_note = nullptr;
  for (const UsdtNote& n : notes.notes)
    if (n.probe == "pytorch:malloc") {
      malloc_note = &n;
      break;
    }
  ASSERT_NE(malloc_note, nullptr);
  // Its first argument names a register ("-8@%rbp"): the same bytes with the name turned to z's.
  const std::string args = malloc_note->args;
  const size_t at = args.find('%');
  const size_t end = std::min(args.find(' ', at), args.size());
  ASSERT_LT(at, args.find(' ')) << args;
  std::string broken = args;
  for (size_t i = at + 1; i < end; ++i) broken[i] = 'z';
  std::string bytes;
  if (FILE* in = std::fopen(path.c_str(), "rb")) {
    char buf[1 << 16];
    while (size_t n = std::fread(buf, 1, sizeof buf, in)) bytes.append(buf, n);
    std::fclose(in);
  }
  const size_t where = bytes.find(args + '\0');
  ASSERT_NE(where, std::string::npos);
  bytes.replace(where, args.size(), broken);
  char copy[] = "/tmp/vigil-c10-broken-XXXXXX";
  const int fd = mkstemp(copy);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  const UsdtSites sites = usdt_sites(copy, {"pytorch:malloc", "pytorch:free"}, kMaxUsdtSitesPerFile);
  unlink(copy);
  char location[24];
  std::snprintf(location, sizeof location, "0x%llx", static_cast<unsigned long long>(malloc_note->location));
  const std::string reg = broken.substr(at + 1, end - at - 1);
  EXPECT_EQ(sites.refused, "pytorch:malloc at " + std::string(location) + ": argument 1 '" + broken.substr(0, end) +
                               "': register '" + reg + "' is not one libbpf reads");
}

}  // namespace
}  // namespace vigil::agent
