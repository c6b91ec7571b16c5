// MappedFile: the file's bytes, unchanged, in huge pages where the kernel gives them (counted
// against the kernel's own per-process total), or in the file's mapping, and read-only either way.
#include "model/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/llama_model.h"

namespace vigil {
namespace {

std::vector<uint8_t> random_bytes(size_t n) {
  std::mt19937_64 rng(42);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::string write_temp(const std::vector<uint8_t>& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("mapped_file_test." + std::to_string(::getpid()) + "." +
                             std::to_string(bytes.size()))).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  return path;
}

// The kernel's own total over the process (not the per-mapping lines the code under test reads).
uint64_t rollup_anon_huge_bytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("AnonHugePages:", 0) == 0) return std::stoull(line.substr(14)) * 1024;
  return 0;
}

std::string thp_enabled() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(in, s);
  return s;
}

bool thp_usable() {
  const std::string s = thp_enabled();
  return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
}

TEST(MappedFile, HugePageCopyHoldsTheFileBytesInHugePages) {
  // 5 MiB and a bit: two whole huge pages, a partial third, and an unaligned end.
  const auto bytes = random_bytes((size_t{5} << 20) + 123);
  const std::string path = write_temp(bytes);
  const uint64_t before = rollup_anon_huge_bytes();
  {
    MappedFile f(path, WeightsPlacement::kHugePages);
    ASSERT_EQ(f.bytes().size(), bytes.size());
    EXPECT_EQ(std::memcmp(f.bytes().data(), bytes.data(), bytes.size()), 0);
    if (!thp_usable()) {
      EXPECT_EQ(f.placement(), WeightsPlacement::kPageCache);
      EXPECT_NE(f.fallback_reason().find("transparent_hugepage"), std::string::npos) << f.fallback_reason();
      return;  // THP off here: the fallback is what there is to check
    }
    EXPECT_EQ(f.placement(), WeightsPlacement::kHugePages) << f.fallback_reason();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.bytes().data()) % (2u << 20), 0u) << "not 2 MiB-aligned";
    EXPECT_GE(f.pmd_mapped_bytes(), uint64_t{2} << 20) << f.describe();
    EXPECT_LE(f.pmd_mapped_bytes(), bytes.size());
    // The kernel's process-wide count grew by at least what the copy says it holds.
    EXPECT_GE(rollup_anon_huge_bytes() - before, f.pmd_mapped_bytes()) << f.describe();
    EXPECT_NE(f.describe().find("huge pages ("), std::string::npos) << f.describe();
    EXPECT_DEATH(const_cast<uint8_t*>(f.bytes().data())[0] ^= 1, "") << "the copy must be read-only";
  }
  std::filesystem::remove(path);
}

TEST(MappedFile, PageCacheMapsTheFileItself) {
  const auto bytes = random_bytes(100000);
  const std::string path = write_temp(bytes);
  MappedFile f(path, WeightsPlacement::kPageCache);
  EXPECT_EQ(f.placement(), WeightsPlacement::kPageCache);
  EXPECT_TRUE(f.fallback_reason().empty());
  ASSERT_EQ(f.bytes().size(), bytes.size());
  EXPECT_EQ(std::memcmp(f.bytes().data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(f.pmd_mapped_bytes(), 0u) << "a 100 kB file has no 2 MiB page";
  EXPECT_DEATH(const_cast<uint8_t*>(f.bytes().data())[0] ^= 1, "");
  std::filesystem::remove(path);
}

TEST(MappedFile, EmptyFileAndMissingFile) {
  const std::string path = write_temp({});
  MappedFile f(path, WeightsPlacement::kHugePages);
  EXPECT_EQ(f.bytes().size(), 0u);
  EXPECT_EQ(f.pmd_mapped_bytes(), 0u);
  std::filesystem::remove(path);
  EXPECT_THROW(MappedFile("/nonexistent/model.gguf", WeightsPlacement::kHugePages), std::runtime_error);
}

TEST(MappedFile, PlacementNames) {
  EXPECT_EQ(parse_weights_placement("huge_pages"), WeightsPlacement::kHugePages);
  EXPECT_EQ(parse_weights_placement("page_cache"), WeightsPlacement::kPageCache);
  EXPECT_EQ(parse_weights_placement("hugepages"), std::nullopt);
}

TEST(MappedFile, TheShippedModelLoadsIdenticallyBothWays) {
  if (!std::filesystem::exists(VIGIL_MODEL_PATH)) GTEST_FAIL() << VIGIL_MODEL_PATH << " missing: run scripts/fetch_model.sh";
  auto huge = LlamaModel::load(VIGIL_MODEL_PATH, WeightsPlacement::kHugePages);
  auto shared = LlamaModel::load(VIGIL_MODEL_PATH, WeightsPlacement::kPageCache);
  const auto a = huge->file().mapping()->bytes(), b = shared->file().mapping()->bytes();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
  EXPECT_EQ(huge->weight_bytes(), shared->weight_bytes());
  // Tensors point into the copy, not into the file's mapping.
  const auto* embd = huge->file().find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_GE(embd->data, a.data());
  EXPECT_LT(embd->data, a.data() + a.size());
}

}  // namespace
}  // namespace vigil
