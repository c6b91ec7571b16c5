// What a scheduling step costs on this backend, learned from the steps the engine runs, and the
// prompt chunk that keeps a step holding decodes within a latency target (stall-free batching:
// Sarathi-Serve, vLLM's chunked prefill).
#pragma once

#include <array>
#include <cstdint>

namespace vigil {

// What the model prices in a step. A token at position `pos` attends over pos + 1 cached K/V rows.
struct StepShape {
  int decode_tokens = 0;
  int prefill_tokens = 0;
  int64_t decode_kv_rows = 0;   // K/V rows the decodes' attention reads
  int64_t prefill_kv_rows = 0;  // ... and the prompt tokens'
};

// K/V rows read by `tokens` prompt tokens at positions start, start + 1, ...
int64_t prompt_kv_rows(int start, int tokens);

// A step's time is modelled as decode(d, r) + c x r_p + p x prefill_token(p), with d decode tokens
// reading r K/V rows and p prompt tokens reading r_p: decode(d, r) = a + b d + c r, a plane fitted
// over recent decode-only steps (a is mostly every weight read once, so it dominates; c is the
// attention's cost a cached row, which the decodes of a long conversation pay and a prompt chunk
// late in a long prompt too), prefill_token(p) the marginal cost of one prompt token beside them in
// a chunk of p, learned per class of chunk sizes, because it is not one number: each chunk may add
// fixed work (another row tile in every matrix product: small chunks dearer a token), or its first
// rows may ride on the weights the decodes read anyway (small chunks cheaper; on the 2-core Zen 4
// CPU of docs/performance.md a 1–2 token chunk adds ~0–0.5 ms a token beside a decode, chunks of 8
// and more ~1.4 ms). Without c, the attention of 16 decodes 600 positions deep was charged to the
// few prompt tokens beside them, and chunks shrank to a few tokens under load (docs/decisions.md).
// Everything is exponentially weighted, so the model follows load, thermal and neighbour changes.
class StepCostModel {
 public:
  // Chunk size classes, by lower bound: [1], [2, 3], [4, 7], ..., [128, any).
  static constexpr std::array<int, 8> kChunkClassStart{1, 2, 4, 8, 16, 32, 64, 128};
  static int chunk_class(int prefill_tokens);  // index into kChunkClassStart; prefill_tokens >= 1

  // A step of this shape took `seconds`. Decode-only steps teach the plane; a step with prompt
  // tokens, once the plane has a point, its class's prompt-token cost.
  void observe(const StepShape& step, double seconds);

  double decode_seconds(int decode_tokens, int64_t kv_rows) const;  // a decode-only step
  double kv_row_seconds() const;  // c: the attention's cost a cached row
  // One prompt token's share of a chunk of `prefill_tokens`, its K/V reads aside: its class's cost,
  // or the nearest learned class's (the smaller class on a tie); 0 before any is learned.
  double prefill_token_seconds(int prefill_tokens) const;
  double predict(const StepShape& step) const;
  // The most tokens (0..max_tokens) of a prompt whose next position is `start` that fit in `room`
  // seconds beside prompt tokens already in the step (`tokens_before`, reading `rows_before`);
  // max_tokens while no prompt-token cost is learned.
  int prompt_fit(double room, int tokens_before, int64_t rows_before, int start, int max_tokens) const;
  // How much longer than predicted a step of decodes and prompt tokens runs, bar the worst
  // 1 - kOverrunQuantile: that quantile of actual - predicted over recent such steps, in seconds,
  // at least 0. A plan to the mean prediction overran its target in 1.5 % of steps at 0.8x of
  // saturation, which put ITL P99 over the ceiling (docs/performance.md); the planner leaves this
  // much of the target unplanned. Seconds, not a ratio: what delays a step on a busy machine (a
  // thread preempted, a page fault) adds time whatever the step's size, and a ratio learned on
  // small steps (x1.5-1.8 at 0.8x) took 40 % of the room of large ones.
  static constexpr double kOverrunQuantile = 0.98;
  double overrun_seconds() const { return overrun_; }

 private:
  // A class's chunks are priced at the dearer of its own rate and the next class's, which bounds
  // the rate anywhere inside it whether cost a token falls or rises with the chunk's size.
  double prefill_price(int prefill_tokens) const;
  // Exponentially weighted sums over decode-only steps: weight, x = decode tokens, r = K/V rows,
  // y = seconds.
  double w_ = 0, sx_ = 0, sr_ = 0, sy_ = 0, sxx_ = 0, srr_ = 0, sxr_ = 0, sxy_ = 0, sry_ = 0;
  std::array<double, kChunkClassStart.size()> prefill_token_{};  // seconds a token, per class
  std::array<bool, kChunkClassStart.size()> learned_{};
  double overrun_ = 0;  // the quantile's estimate
};

}  // namespace vigil
