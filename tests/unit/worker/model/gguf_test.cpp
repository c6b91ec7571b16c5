// GGUF reader: every value type, tensor inventory, and a clear error for each kind of broken file.
#include "model/gguf.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "worker/gguf_builder.h"

namespace vigil {
namespace {

using test::GgufBuilder;

std::vector<uint8_t> f32_bytes(size_t n) {
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    float v = static_cast<float>(i);
    std::memcpy(b.data() + 4 * i, &v, 4);
  }
  return b;
}

GgufBuilder valid_builder() {
  GgufBuilder b;
  b.kv<uint8_t>("u8", 0, 200)
      .kv<int8_t>("i8", 1, -5)
      .kv<uint16_t>("u16", 2, 60000)
      .kv<int16_t>("i16", 3, -30000)
      .kv<uint32_t>("u32", 4, 4000000000u)
      .kv<int32_t>("i32", 5, -2000000000)
      .kv<float>("f32", 6, 1.5f)
      .kv<uint8_t>("flag", 7, 1)
      .kv_string("general.architecture", "llama")
      .kv<uint64_t>("u64", 10, uint64_t{1} << 40)
      .kv<int64_t>("i64", 11, -(int64_t{1} << 40))
      .kv<double>("f64", 12, 0.25)
      .kv_strings("tokens", {"a", "bc", "<|im_end|>"})
      .kv_array<int32_t>("types", 5, {1, 3, 3})
      .kv_array<float>("scores", 6, {0.5f, -1.0f})
      .tensor("w", 0, {4, 3}, f32_bytes(12))
      .tensor("q", 3, {64, 2}, std::vector<uint8_t>(2 * 2 * 20, 7));
  return b;
}

TEST(Gguf, ReadsEveryValueTypeAndTensor) {
  auto bytes = valid_builder().build();
  auto f = GgufFile::parse(bytes, "mem.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_uint("u8"), 200u);
  EXPECT_EQ(f.find("i8")->i, -5);
  EXPECT_EQ(f.get_uint("u16"), 60000u);
  EXPECT_EQ(f.find("i16")->i, -30000);
  EXPECT_EQ(f.get_uint("u32"), 4000000000u);
  EXPECT_EQ(f.find("i32")->i, -2000000000);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("f32")), 1.5f);
  EXPECT_TRUE(f.get_bool("flag"));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("u64"), uint64_t{1} << 40);
  EXPECT_EQ(f.find("i64")->i, -(int64_t{1} << 40));
  EXPECT_DOUBLE_EQ(f.get_float("f64"), 0.25);
  auto tokens = f.get_string_array("tokens");
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[2], "<|im_end|>");
  EXPECT_EQ(f.get_int_array("types"), (std::vector<int32_t>{1, 3, 3}));
  EXPECT_EQ(f.get_float_array("scores"), (std::vector<float>{0.5f, -1.0f}));

  const GgufTensor& w = f.require_tensor("w", {4, 3});
  EXPECT_EQ(w.type, GgmlType::F32);
  EXPECT_EQ(w.n_bytes, 48u);
  float v;
  std::memcpy(&v, w.data + 4 * 7, 4);
  EXPECT_EQ(v, 7.0f);
  const GgufTensor& q = f.require_tensor("q", {64, 2});
  EXPECT_EQ(q.type, GgmlType::Q4_1);
  EXPECT_EQ(q.n_bytes, 80u);
  EXPECT_EQ(q.data[0], 7);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q.data - reinterpret_cast<uintptr_t>(bytes.data())) % 32, 0u);
}

TEST(Gguf, TypedAccessorsNameTheKey) {
  auto bytes = valid_builder().build();
  auto f = GgufFile::parse(bytes, "mem.gguf");
  EXPECT_THROW(
      {
        try {
          f.get_string("u32");
        } catch (const GgufError& e) {
          EXPECT_STREQ(e.what(), "mem.gguf: metadata 'u32' is u32, expected a string");
          throw;
        }
      },
      GgufError);
  EXPECT_THROW(f.get_uint("missing.key"), GgufError);
  EXPECT_EQ(f.get_uint_or("missing.key", 9), 9u);
  EXPECT_THROW(f.get_uint("i8"), GgufError);  // negative value for an unsigned field
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    auto f = GgufFile::parse(bytes, "bad.gguf");
    return "";
  } catch (const GgufError& e) {
    return e.what();
  }
}

TEST(Gguf, EveryTruncationIsAnErrorNotACrash) {
  auto bytes = valid_builder().build();
  // Tensor data ends the file, so every proper prefix is missing something.
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<long>(n));
    std::string err = error_of(prefix);
    ASSERT_FALSE(err.empty()) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(err.rfind("bad.gguf: ", 0), 0u) << err;
  }
}

TEST(Gguf, BadMagicAndVersion) {
  auto bytes = valid_builder().build();
  auto bad = bytes;
  bad[0] = 'X';
  EXPECT_EQ(error_of(bad), "bad.gguf: not a GGUF file (bad magic)");
  EXPECT_EQ(error_of(GgufBuilder(1).build()), "bad.gguf: unsupported GGUF version 1 (supported: 2, 3)");
  EXPECT_EQ(error_of(GgufBuilder(4).build()), "bad.gguf: unsupported GGUF version 4 (supported: 2, 3)");
  EXPECT_EQ(error_of(GgufBuilder(2).build()), "");
}

TEST(Gguf, AbsurdCountsAreRejectedBeforeAllocating) {
  auto bytes = GgufBuilder().build();
  uint64_t huge = uint64_t{1} << 60;
  auto bad = bytes;
  std::memcpy(bad.data() + 8, &huge, 8);
  EXPECT_NE(error_of(bad).find("tensor count"), std::string::npos);
  bad = bytes;
  std::memcpy(bad.data() + 16, &huge, 8);
  EXPECT_NE(error_of(bad).find("metadata count"), std::string::npos);

  GgufBuilder b;
  b.kv_strings("s", {"x"});
  auto arr = b.build();
  // The array length sits right after key (8 + 1), type (4) and element type (4).
  std::memcpy(arr.data() + 24 + 8 + 1 + 4 + 4, &huge, 8);
  EXPECT_NE(error_of(arr).find("cannot fit"), std::string::npos) << error_of(arr);
}

TEST(Gguf, BadTensorsNameTheTensor) {
  EXPECT_EQ(error_of(GgufBuilder().tensor_at("t", 0, {4}, 64).build()),
            "bad.gguf: tensor 't' data [64, 80) runs past the end of the data section (0 bytes)");
  EXPECT_EQ(error_of(GgufBuilder().tensor_at("t", 0, {4}, 3).build()),
            "bad.gguf: tensor 't' offset 3 is not aligned to 32");
  EXPECT_EQ(error_of(GgufBuilder().tensor_at("t", 99, {4}, 0).build()),
            "bad.gguf: tensor 't' has unknown type 99");
  EXPECT_EQ(error_of(GgufBuilder().tensor_at("t", 0, {4, 0}, 0).build()),
            "bad.gguf: tensor 't' has an absurd shape (dimension 1 = 0)");
  EXPECT_EQ(error_of(GgufBuilder().tensor_at("t", 0, {1u << 20, 1u << 20, 1u << 20}, 0).build()),
            "bad.gguf: tensor 't' has an absurd shape (dimension 2 = 1048576)");
  EXPECT_EQ(error_of(GgufBuilder().tensor_at("t", 0, {1, 1, 1, 1, 1}, 0).build()),
            "bad.gguf: tensor 't' has 5 dimensions (1 to 4 allowed)");
  EXPECT_EQ(error_of(GgufBuilder().tensor_at("t", 3, {48}, 0).build()),
            "bad.gguf: tensor 't' row of 48 is not a multiple of Q4_1's block of 32");
  EXPECT_EQ(error_of(GgufBuilder().tensor("t", 0, {1}, f32_bytes(1)).tensor("t", 0, {1}, f32_bytes(1)).build()),
            "bad.gguf: tensor 't' appears twice");
}

TEST(Gguf, BadMetadata) {
  GgufBuilder b;
  b.kv<uint32_t>("k", 77, 0);
  EXPECT_EQ(error_of(b.build()), "bad.gguf: metadata 'k' has unknown value type 77");
  GgufBuilder dup;
  dup.kv<uint32_t>("k", 4, 1).kv<uint32_t>("k", 4, 2);
  EXPECT_EQ(error_of(dup.build()), "bad.gguf: metadata key 'k' repeated");
  GgufBuilder align;
  align.kv<uint32_t>("general.alignment", 4, 3);
  EXPECT_EQ(error_of(align.build()), "bad.gguf: general.alignment must be a power of two up to 65536");
}

TEST(Gguf, RequireTensorNamesShapeAndAbsence) {
  auto bytes = valid_builder().build();
  auto f = GgufFile::parse(bytes, "mem.gguf");
  try {
    f.require_tensor("nope", {1});
    FAIL();
  } catch (const GgufError& e) {
    EXPECT_STREQ(e.what(), "mem.gguf: tensor 'nope' not found in the model");
  }
  try {
    f.require_tensor("w", {3, 4});
    FAIL();
  } catch (const GgufError& e) {
    EXPECT_STREQ(e.what(), "mem.gguf: tensor 'w' has shape [4, 3], expected [3, 4]");
  }
}

TEST(Gguf, OpensTheShippedModel) {
  if (!std::filesystem::exists(VIGIL_MODEL_PATH)) GTEST_FAIL() << VIGIL_MODEL_PATH << " missing: run scripts/fetch_model.sh";
  auto f = GgufFile::open(VIGIL_MODEL_PATH);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.require_tensor("token_embd.weight", {576, 49152}).type, GgmlType::Q8_0);
  EXPECT_EQ(f.require_tensor("blk.0.ffn_down.weight", {1536, 576}).type, GgmlType::Q4_1);
  EXPECT_EQ(f.require_tensor("output_norm.weight", {576}).type, GgmlType::F32);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 49152u);
}

TEST(Gguf, MissingFileIsAClearError) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/model.gguf: cannot open: No such file or directory");
  }
}

}  // namespace
}  // namespace vigil
