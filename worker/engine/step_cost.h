// What a scheduling step costs on this backend, learned from the steps the engine runs, and the
// prompt chunk that keeps a step holding decodes within a latency target (stall-free batching:
// Sarathi-Serve, vLLM's chunked prefill).
#pragma once

#include <array>
#include <cstddef>
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

// A step's time is modelled as a + b d + c r + p x prefill_token(p) + r_p x prefill_kv_row(p), with
// d decode tokens reading r K/V rows and p prompt tokens reading r_p: a is mostly every weight read
// once, so it dominates; c the attention's cost a cached row for a decode (the decodes of a long
// conversation pay it); and for the prompt tokens a pair per class of chunk sizes: a token's own
// cost and the cost of a K/V row its attention reads. Both vary with the chunk's size. Each chunk
// may add fixed work (another row tile in every matrix product: small chunks dearer a token), or its
// first rows may ride on the weights the decodes read anyway (small chunks cheaper; on the 2-core
// Zen 4 CPU of docs/performance.md a 1–2 token chunk adds ~0–0.5 ms a token beside a decode, chunks
// of 8 and more ~1.3 ms); and a chunk reads each cached row once for all its tokens, so a prompt
// token's row costs a fifth to a twentieth of a decode's there (0.5–2 us against 4–10). Priced at the
// decode's, the K/V reads of a 20-token chunk 500 positions deep cost 104 ms on paper and ~15 in
// fact, and chunks shrank under load to ~19 tokens (docs/decisions.md).
// All of it is one least-squares fit over every step, exponentially weighted so the model follows
// load, thermal and neighbour changes: under load nearly every step carries a prompt, and a plane
// for the decodes fitted on decode-only steps stayed where the last quiet moment left it (its cost
// a row at 0 or at 10 us by chance, and the latency target, five of its decode steps, with it).
class StepCostModel {
 public:
  // Chunk size classes, by lower bound: [1], [2, 3], [4, 7], ..., [128, any).
  static constexpr std::array<int, 8> kChunkClassStart{1, 2, 4, 8, 16, 32, 64, 128};
  static int chunk_class(int prefill_tokens);  // index into kChunkClassStart; prefill_tokens >= 1

  // A step of this shape took `seconds`: the fit learns from it (steps with prompt tokens once a
  // decode-only step has been seen).
  void observe(const StepShape& step, double seconds);

  double decode_seconds(int decode_tokens, int64_t kv_rows) const;  // a decode-only step
  double kv_row_seconds() const;  // c: the attention's cost a cached row, for a decode
  // One prompt token's share of a chunk of `prefill_tokens`, its K/V reads aside, and what one
  // cached row its attention reads costs: its class's, or the nearest learned class's (the
  // smaller class on a tie); 0 before any is learned.
  double prefill_token_seconds(int prefill_tokens) const;
  double prefill_kv_row_seconds(int prefill_tokens) const;
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
  // small steps (x1.5-1.8 at 0.8x) took 40 % of the room of large ones. The 99th, not the 98th:
  // under load nearly every step carries prompt tokens, so the share of them over the target is
  // the share of gaps over it, and with the K/V rows of prompts priced at their own cost (rather
  // than at a decode's, which kept most steps well short) the 98th put ITL P99 at 99–102 ms.
  static constexpr double kOverrunQuantile = 0.99;
  double overrun_seconds() const { return overrun_; }

 private:
  // The fit's coefficients, in the order of its features: 1, d, r / 1000, then for each class p and
  // r_p / 1000 (rows in thousands keep the normal equations well scaled).
  static constexpr std::size_t kClasses = kChunkClassStart.size();
  static constexpr std::size_t kFeatures = 3 + 2 * kClasses;
  using Vector = std::array<double, kFeatures>;
  // A class's pair: seconds a prompt token, and a K/V row it reads.
  struct PromptLine {
    double token = 0, row = 0;
    double seconds(int tokens, int64_t rows) const { return tokens * token + row * static_cast<double>(rows); }
  };
  static Vector features(const StepShape& step);
  void solve();                                      // coef_ from the sums
  bool learned(std::size_t cls) const;                 // the fit has seen enough of its steps
  PromptLine nearest_line(int prefill_tokens) const;  // its class's, or the nearest learned one's
  // Exponentially weighted sums over steps: total weight, each class's weight, features' products,
  // features times seconds.
  double w_ = 0;
  std::array<double, kClasses> class_w_{};
  std::array<Vector, kFeatures> ff_{};
  Vector fy_{};
  Vector coef_{};
  bool decoded_ = false;  // a decode-only step has been seen: the plane has a point
  double overrun_ = 0;    // the quantile's estimate
};

}  // namespace vigil
