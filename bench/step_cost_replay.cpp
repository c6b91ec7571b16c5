// How well the step cost model predicts steps the worker really ran: each step of a log replayed
// through StepCostModel in order (predicted before it is learned, as the engine does), the error of
// its steps with decodes and prompt tokens set beside the prediction the log's own worker made.
//
// A log line is one step: decode_tokens prefill_tokens decode_kv_rows prefill_kv_rows seconds
// predicted target (the last three in seconds), as Engine::account_step knows them; the logs of
// docs/performance/step_log_43_*.txt and the patch that wrote them are in docs/performance.md
// ("The step budget of #43, eighth run").
//
//   g++ -std=c++20 -O2 -Iworker bench/step_cost_replay.cpp worker/engine/step_cost.cpp -o /tmp/step_cost_replay
//   /tmp/step_cost_replay docs/performance/step_log_43_before_0.8.txt
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/step_cost.h"

namespace {

struct Errors {
  std::vector<double> ms;
  void add(double seconds) { ms.push_back(seconds * 1e3); }
  double mean() const {
    double s = 0;
    for (double x : ms) s += x;
    return s / static_cast<double>(ms.size());
  }
  double rms() const {
    double s = 0;
    for (double x : ms) s += x * x;
    return std::sqrt(s / static_cast<double>(ms.size()));
  }
  double quantile(double q) const {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1))];
  }
  void print(const char* who) const {
    std::printf("  %-22s mean %+6.2f  rms %6.2f  p01 %+7.2f  p99 %+7.2f ms\n", who, mean(), rms(), quantile(0.01),
                quantile(0.99));
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s STEP_LOG\n", argv[0]);
    return 2;
  }
  std::FILE* log = std::fopen(argv[1], "r");
  if (!log) {
    std::perror(argv[1]);
    return 1;
  }
  // The first steps teach a cold model (the worker's was calibrated at start): not counted.
  constexpr int kWarmup = 50;
  vigil::StepCostModel model;
  Errors replayed, logged;
  int decode_tokens, prefill_tokens, steps = 0;
  long long decode_rows, prefill_rows;
  double seconds, predicted, target;
  while (std::fscanf(log, "%d %d %lld %lld %lf %lf %lf", &decode_tokens, &prefill_tokens, &decode_rows,
                     &prefill_rows, &seconds, &predicted, &target) == 7) {
    const vigil::StepShape step{decode_tokens, prefill_tokens, decode_rows, prefill_rows};
    if (++steps > kWarmup && decode_tokens > 0 && prefill_tokens > 0) {
      replayed.add(seconds - model.predict(step));
      logged.add(seconds - predicted);
    }
    model.observe(step, seconds);
  }
  std::fclose(log);
  if (replayed.ms.empty()) {
    std::fprintf(stderr, "%s: no step with decodes and prompt tokens after the first %d\n", argv[1], kWarmup);
    return 1;
  }
  std::printf("%s: %d steps, %zu with decodes and prompt tokens; actual - predicted:\n", argv[1], steps,
              replayed.ms.size());
  replayed.print("this model, replayed");
  logged.print("the logged worker's");
  std::printf("  learned at the end: kv_row %.2f us, overrun %.2f ms; per class, prompt token ms / prompt row us:",
              model.kv_row_seconds() * 1e6, model.overrun_seconds() * 1e3);
  for (int c : vigil::StepCostModel::kChunkClassStart)
    std::printf(" [%d] %.2f/%.2f", c, model.prefill_token_seconds(c) * 1e3, model.prefill_kv_row_seconds(c) * 1e6);
  std::printf("\n");
  return 0;
}
