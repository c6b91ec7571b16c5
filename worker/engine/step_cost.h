// What a scheduling step costs on this backend, learned from the steps the engine runs, and the
// prefill chunk that keeps a step holding decodes within a latency target (stall-free batching:
// Sarathi-Serve, vLLM's chunked prefill).
#pragma once

namespace vigil {

// A step's time is modelled as decode(d) + p * prefill_token, with d decode tokens and p prefill
// tokens: decode(d) a line fitted over recent steps (it is mostly the weights read once per
// step, so it grows slowly with d), prefill_token the marginal cost of one prompt token beside
// them. Both are exponentially weighted, so the model follows load, thermal and neighbour changes.
class StepCostModel {
 public:
  // Seeds the model from a calibration: one decode-only step of one token, and one step of
  // `prefill_tokens` prompt tokens alone.
  void seed(double decode_seconds, int prefill_tokens, double prefill_seconds);
  // A step that ran `decode_tokens` decodes and `prefill_tokens` prompt tokens in `seconds`.
  void observe(int decode_tokens, int prefill_tokens, double seconds);

  double decode_seconds(int decode_tokens) const;  // a decode-only step
  double prefill_token_seconds() const { return prefill_token_; }
  double predict(int decode_tokens, int prefill_tokens) const {
    return decode_seconds(decode_tokens) + prefill_tokens * prefill_token_;
  }
  // The most prompt tokens (0..max_tokens) that fit beside `decode_tokens` decodes within
  // target_seconds.
  int prefill_budget(int decode_tokens, double target_seconds, int max_tokens) const;

 private:
  // Exponentially weighted sums over decode-only steps: weight, x = decode tokens, y = seconds.
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  double prefill_token_ = 0;
  bool seeded_ = false;
};

}  // namespace vigil
