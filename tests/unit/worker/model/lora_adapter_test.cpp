// LoRA adapters on the real model: validation of every field and shape, and one matmul with an
// adapter against the merged weights W + (alpha/rank)·B·A computed in float64.
#include "backend/cpu/lora_apply.h"
#include "model/lora_adapter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "worker/lora_builder.h"

namespace vigil {
namespace {

using test::LoraPairSpec;
using test::LoraSpec;

class LoraAdapterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = LlamaModel::load(VIGIL_MODEL_PATH).release(); }
  static void TearDownTestSuite() { delete model_; }

  static std::shared_ptr<const LoraAdapter> parse(const LoraSpec& spec) {
    bytes_ = test::build_lora(spec, *model_);
    return LoraAdapter::from_gguf(GgufFile::parse(bytes_, "adapter.gguf"), *model_);
  }
  // The message of the GgufError that parsing `spec` throws ("" when it does not throw).
  static std::string error_of(const LoraSpec& spec) {
    try {
      parse(spec);
    } catch (const GgufError& e) {
      return e.what();
    }
    return "";
  }
  static LoraSpec one_pair(LoraPairSpec p) {
    LoraSpec s;
    s.pairs = {p};
    return s;
  }

  static LlamaModel* model_;
  static std::vector<uint8_t> bytes_;
};
LlamaModel* LoraAdapterTest::model_ = nullptr;
std::vector<uint8_t> LoraAdapterTest::bytes_;

TEST_F(LoraAdapterTest, LoadsPairsWithAlphaOverRankScale) {
  LoraSpec s;
  s.pairs = {{0, "attn_q", 8}, {0, "attn_v", 8}, {3, "ffn_down", 4}};
  auto a = parse(s);
  EXPECT_EQ(a->n_pairs(), 3);
  EXPECT_EQ(a->max_rank(), 8);
  ASSERT_NE(a->pair(0, LayerMatrix::kQ), nullptr);
  EXPECT_FLOAT_EQ(a->pair(0, LayerMatrix::kQ)->scale, 2.0f);
  EXPECT_FLOAT_EQ(a->pair(3, LayerMatrix::kDown)->scale, 4.0f);
  EXPECT_EQ(a->pair(0, LayerMatrix::kK), nullptr);
  EXPECT_EQ(a->pair(1, LayerMatrix::kQ), nullptr);
  const LoraPair& down = *a->pair(3, LayerMatrix::kDown);
  EXPECT_EQ(down.a.rows, 4);
  EXPECT_EQ(down.a.cols, model_->hparams().n_ff);
  EXPECT_EQ(down.b.rows, model_->hparams().n_embd);
  EXPECT_EQ(down.b.cols, 4);
  // The tensors are copied: the bytes the adapter came from may go away.
  bytes_.assign(bytes_.size(), 0xff);
  EXPECT_TRUE(std::isfinite(reinterpret_cast<const float*>(down.a.data)[0]));
}

TEST_F(LoraAdapterTest, ZeroAlphaMeansNoScalingAsInLlamaCpp) {
  LoraSpec s = one_pair({0, "attn_q", 8});
  s.alpha = 0.0f;
  EXPECT_FLOAT_EQ(parse(s)->pair(0, LayerMatrix::kQ)->scale, 1.0f);
}

// y = x · (W + s·B·A)ᵀ in float64, W dequantized from the model file.
std::vector<double> merged_reference(const WeightView& w, const LoraPair& p, const std::vector<float>& x, int n) {
  const int64_t n_in = w.cols, n_out = w.rows, rank = p.a.rows;
  auto dequant = [](const WeightView& v) {
    std::vector<float> out(static_cast<size_t>(v.rows * v.cols));
    const size_t row_bytes = v.row_bytes();
    for (int64_t r = 0; r < v.rows; ++r)
      dequantize_row(v.type, v.data + static_cast<size_t>(r) * row_bytes, v.cols, &out[static_cast<size_t>(r * v.cols)]);
    return out;
  };
  const std::vector<float> W = dequant(w), A = dequant(p.a), B = dequant(p.b);
  std::vector<double> merged(static_cast<size_t>(n_out * n_in));
  for (int64_t o = 0; o < n_out; ++o)
    for (int64_t i = 0; i < n_in; ++i) {
      double ba = 0.0;
      for (int64_t r = 0; r < rank; ++r) ba += static_cast<double>(B[static_cast<size_t>(o * rank + r)]) * static_cast<double>(A[static_cast<size_t>(r * n_in + i)]);
      merged[static_cast<size_t>(o * n_in + i)] = static_cast<double>(W[static_cast<size_t>(o * n_in + i)]) + static_cast<double>(p.scale) * ba;
    }
  std::vector<double> y(static_cast<size_t>(n * n_out));
  for (int t = 0; t < n; ++t)
    for (int64_t o = 0; o < n_out; ++o) {
      double acc = 0.0;
      for (int64_t i = 0; i < n_in; ++i) acc += merged[static_cast<size_t>(o * n_in + i)] * static_cast<double>(x[static_cast<size_t>(t * n_in + i)]);
      y[static_cast<size_t>(t * n_out + o)] = acc;
    }
  return y;
}

void check_against_merged(const LoraAdapter& adapter, int layer, LayerMatrix target, const WeightView& w, double delta_tolerance) {
  const LoraPair& p = *adapter.pair(layer, target);
  const int n = 5;
  const size_t n_in = static_cast<size_t>(w.cols), n_out = static_cast<size_t>(w.rows);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n * n_in);
  for (float& v : x) v = nd(rng);

  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> base(n * n_out), y(n * n_out), gather(n * n_in), t(static_cast<size_t>(n * p.a.rows)), d(n * n_out);
  matmul(w, x.data(), n, base.data(), pool, scratch);
  y = base;
  const int rows[n] = {0, 1, 2, 3, 4};
  lora_add(p, x.data(), rows, n, y.data(), gather.data(), t.data(), d.data(), pool, scratch);

  const std::vector<double> ref = merged_reference(w, p, x, n);
  std::vector<double> base_ref(n * n_out);
  {
    LoraPair zero = p;
    zero.scale = 0.0f;
    base_ref = merged_reference(w, zero, x, n);
  }
  double max_delta = 0.0, worst_delta = 0.0, worst_total = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double delta_ref = ref[i] - base_ref[i];
    max_delta = std::max(max_delta, std::abs(delta_ref));
    max_ref = std::max(max_ref, std::abs(ref[i]));
    // Our delta (y - base, both from our kernels) against the exact one.
    worst_delta = std::max(worst_delta, std::abs((static_cast<double>(y[i]) - static_cast<double>(base[i])) - delta_ref));
    worst_total = std::max(worst_total, std::abs(static_cast<double>(y[i]) - ref[i]));
  }
  ASSERT_GT(max_delta, 0.1) << "the adapter must change the output visibly";
  EXPECT_LT(worst_delta, delta_tolerance * max_delta);
  // The whole product also carries the base kernel's activation quantization (Q8_1 for Q4_1
  // weights, about 1/127 of each block's largest value), so it gets a looser bound.
  EXPECT_LT(worst_total, 0.02 * max_ref);
}

TEST_F(LoraAdapterTest, F32MatmulPlusDeltaMatchesMergedWeightsInFloat64) {
  LoraSpec s;
  s.pairs = {{2, "attn_q", 8}, {2, "ffn_down", 16}};
  auto a = parse(s);
  const LlamaLayer& l = model_->layers()[2];
  check_against_merged(*a, 2, LayerMatrix::kQ, l.wq, 1e-5);
  check_against_merged(*a, 2, LayerMatrix::kDown, l.ffn_down, 1e-5);
}

TEST_F(LoraAdapterTest, F16MatmulPlusDeltaMatchesMergedWeightsInFloat64) {
  LoraSpec s;
  s.pairs = {{1, "attn_v", 8, 1}, {1, "ffn_up", 8, 1}};
  auto a = parse(s);
  const LlamaLayer& l = model_->layers()[1];
  // F16 weights see their inputs rounded to f16 (as ggml does): relative error about 2^-11 per term.
  check_against_merged(*a, 1, LayerMatrix::kV, l.wv, 2e-3);
  check_against_merged(*a, 1, LayerMatrix::kUp, l.ffn_up, 2e-3);
}

TEST_F(LoraAdapterTest, OnlyTheListedRowsChange) {
  auto a = parse(one_pair({0, "attn_q", 8}));
  const LoraPair& p = *a->pair(0, LayerMatrix::kQ);
  const int n = 4, d = model_->hparams().n_embd;
  std::vector<float> x(static_cast<size_t>(n * d), 0.5f), y(static_cast<size_t>(n * d), 1.0f);
  std::vector<float> gather(static_cast<size_t>(n * d)), t(static_cast<size_t>(n * 8)), out(static_cast<size_t>(n * d));
  ThreadPool pool(1);
  MatmulScratch scratch;
  const int rows[2] = {3, 1};
  lora_add(p, x.data(), rows, 2, y.data(), gather.data(), t.data(), out.data(), pool, scratch);
  for (int i = 0; i < d; ++i) {
    EXPECT_EQ(y[static_cast<size_t>(i)], 1.0f);
    EXPECT_EQ(y[static_cast<size_t>(2 * d + i)], 1.0f);
  }
  EXPECT_EQ(std::memcmp(&y[static_cast<size_t>(d)], &y[static_cast<size_t>(3 * d)], static_cast<size_t>(d) * 4), 0);
  EXPECT_NE(y[static_cast<size_t>(d)], 1.0f);
}

struct BadCase {
  const char* what;
  LoraSpec spec;
  const char* message;
};

LoraSpec with(std::function<void(LoraSpec&)> f) {
  LoraSpec s;
  s.pairs = {{0, "attn_q", 8}};
  f(s);
  return s;
}

TEST_F(LoraAdapterTest, MalformedAdaptersAreRejectedNamingTheProblem) {
  const int d = model_->hparams().n_embd;
  const std::vector<BadCase> cases = {
      {"wrong arch", with([](LoraSpec& s) { s.arch = "gpt2"; }), "adapter is for architecture 'gpt2', the model is 'llama'"},
      {"not an adapter", with([](LoraSpec& s) { s.general_type = "model"; }), "general.type is 'model', expected 'adapter'"},
      {"not lora", with([](LoraSpec& s) { s.adapter_type = "control_vector"; }), "adapter.type is 'control_vector'"},
      {"no alpha", with([](LoraSpec& s) { s.alpha.reset(); }), "adapter.lora.alpha is missing"},
      {"alpha type", with([](LoraSpec& s) { s.alpha_as_uint = true; }), "adapter.lora.alpha has type"},
      {"NaN alpha", with([](LoraSpec& s) { s.alpha = NAN; }), "adapter.lora.alpha is not a finite number"},
      {"inf alpha", with([](LoraSpec& s) { s.alpha = INFINITY; }), "adapter.lora.alpha is not a finite number"},
      {"A wrong n_in", with([&](LoraSpec& s) { s.pairs[0].a_in = d + 1; }), "'blk.0.attn_q.weight.lora_a' has shape"},
      {"B wrong n_out", with([&](LoraSpec& s) { s.pairs[0].b_out = 64; }), "'blk.0.attn_q.weight.lora_b' has shape"},
      {"rank mismatch", with([](LoraSpec& s) { s.pairs[0].b_rank = 4; }), "disagree on the rank"},
      {"k shaped like q", with([&](LoraSpec& s) { s.pairs[0].matrix = "attn_k"; s.pairs[0].b_out = d; }),
       "'blk.0.attn_k.weight.lora_b' has shape"},
      {"missing B", with([](LoraSpec& s) { s.pairs[0].omit_b = true; }), "'blk.0.attn_q.weight.lora_b' is missing"},
      {"unknown target", with([](LoraSpec& s) { s.pairs[0].matrix = "attn_norm"; }),
       "targets 'blk.0.attn_norm.weight', which is not an adaptable matrix"},
      {"layer past the model", with([](LoraSpec& s) { s.pairs[0].layer = 99; }), "targets 'blk.99.attn_q.weight'"},
      {"quantized", with([](LoraSpec& s) { s.pairs[0].type = 8; s.pairs[0].rank = 32; }), "has type Q8_0, expected F32, F16 or BF16"},
      {"NaN weight", with([](LoraSpec& s) { s.pairs[0].nan_in_b = true; }), "holds a non-finite value"},
      {"NaN F16 weight", with([](LoraSpec& s) { s.pairs[0].type = 1; s.pairs[0].nan_in_b = true; }),
       "'blk.0.attn_q.weight.lora_b' holds a non-finite value at element 2304"},
      {"stray tensor", with([](LoraSpec& s) { s.extra_tensors = {"token_embd.weight"}; }),
       "'token_embd.weight' is neither a .lora_a nor a .lora_b tensor"},
      {"no tensors", with([](LoraSpec& s) { s.pairs.clear(); }), "adapter holds no LoRA tensors"},
      {"rank too large", with([](LoraSpec& s) { s.pairs[0].matrix = "attn_k"; s.pairs[0].rank = kMaxLoraRank + 1; }),
       "have rank 513, expected 1..512"},
  };
  for (const BadCase& c : cases) {
    const std::string msg = error_of(c.spec);
    EXPECT_NE(msg.find(c.message), std::string::npos) << c.what << ": got '" << msg << "'";
    EXPECT_NE(msg.find("adapter.gguf"), std::string::npos) << c.what << ": the file is named: '" << msg << "'";
  }
}

TEST_F(LoraAdapterTest, TruncatedFileIsRejected) {
  const auto bytes = test::build_lora(one_pair({0, "attn_q", 8}), *model_);
  const std::string path = testing::TempDir() + "lora_truncated.gguf";
  for (size_t keep : {size_t{10}, bytes.size() / 3, bytes.size() - 1}) {
    test::write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(keep)));
    EXPECT_THROW(LoraAdapter::load(path, *model_), GgufError) << keep << " bytes";
  }
  test::write_file(path, bytes);
  EXPECT_EQ(LoraAdapter::load(path, *model_)->n_pairs(), 1);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vigil
