// What a scheduling step costs on this backend, learned from the steps the engine runs, and the
// prefill chunk that keeps a step holding decodes within a latency target (stall-free batching:
// Sarathi-Serve, vLLM's chunked prefill).
#pragma once

#include <array>

namespace vigil {

// A step's time is modelled as decode(d) + p * prefill_token(p), with d decode tokens and p prefill
// tokens: decode(d) a line fitted over recent steps (it is mostly the weights read once per
// step, so it grows slowly with d), prefill_token(p) the marginal cost of one prompt token beside
// them in a chunk of p, learned per class of chunk sizes, because it is not one number: each chunk
// may add fixed work (another row tile in every matrix product: small chunks dearer a token), or
// its first rows may ride on the weights the decodes read anyway (small chunks cheaper; on the
// 2-core Zen 4 CPU of docs/performance.md a 1–2 token chunk adds ~0–0.5 ms a token beside a
// decode, chunks of 8 and more ~1.4 ms). Both are exponentially weighted, so the model follows
// load, thermal and neighbour changes.
class StepCostModel {
 public:
  // Chunk size classes, by lower bound: [1], [2, 3], [4, 7], ..., [128, any).
  static constexpr std::array<int, 8> kChunkClassStart{1, 2, 4, 8, 16, 32, 64, 128};
  static int chunk_class(int prefill_tokens);  // index into kChunkClassStart; prefill_tokens >= 1

  // Seeds the decode line from a calibration's decode-only step of one token; calibration steps
  // of prompt chunks beside it then go through observe().
  void seed_decode(double decode_seconds);
  // A step that ran `decode_tokens` decodes and `prefill_tokens` prompt tokens in `seconds`.
  void observe(int decode_tokens, int prefill_tokens, double seconds);

  double decode_seconds(int decode_tokens) const;  // a decode-only step
  // One prompt token's share of a chunk of `prefill_tokens`: its class's cost, or the nearest
  // learned class's (the smaller class on a tie); 0 before any is learned.
  double prefill_token_seconds(int prefill_tokens) const;
  double predict(int decode_tokens, int prefill_tokens) const {
    return decode_seconds(decode_tokens) +
           (prefill_tokens > 0 ? prefill_tokens * prefill_token_seconds(prefill_tokens) : 0.0);
  }
  // The most prompt tokens (0..max_tokens) predicted to fit beside `decode_tokens` decodes within
  // target_seconds; max_tokens while no chunk cost is learned.
  int prefill_budget(int decode_tokens, double target_seconds, int max_tokens) const;

 private:
  // Exponentially weighted sums over decode-only steps: weight, x = decode tokens, y = seconds.
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  std::array<double, kChunkClassStart.size()> prefill_token_{};  // seconds a token, per class
  std::array<bool, kChunkClassStart.size()> learned_{};
};

}  // namespace vigil
