#include "backend/batch_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vigil {
namespace {

constexpr size_t kCountInts = 3;  // n_tokens, n_seqs, n_block_ids
constexpr size_t kTokenInts = 4;  // token, pos, sequence index, flags
constexpr int32_t kWantLogits = 1, kGenerated = 2;

[[noreturn]] void malformed(const std::string& what) {
  throw std::runtime_error("tensor parallel: the leader's plan " + what);
}

}  // namespace

std::span<int32_t> BatchPlanEncoder::encode(std::span<const BatchToken> batch) {
  // Linear search: a batch holds at most max_running sequences.
  seqs_.clear();
  size_t n_blocks = 0;
  for (const BatchToken& t : batch)
    if (std::find(seqs_.begin(), seqs_.end(), t.seq) == seqs_.end()) {
      seqs_.push_back(t.seq);
      n_blocks += t.seq->blocks.size();
    }
  plan_.clear();
  plan_.insert(plan_.end(), {static_cast<int32_t>(batch.size()), static_cast<int32_t>(seqs_.size()),
                             static_cast<int32_t>(n_blocks)});
  for (const BatchToken& t : batch) {
    const auto index = static_cast<int32_t>(std::find(seqs_.begin(), seqs_.end(), t.seq) - seqs_.begin());
    plan_.insert(plan_.end(),
                 {t.token, t.pos, index, (t.want_logits ? kWantLogits : 0) | (t.generated ? kGenerated : 0)});
  }
  for (const KvSequence* s : seqs_) plan_.push_back(static_cast<int32_t>(s->blocks.size()));
  for (const KvSequence* s : seqs_) plan_.insert(plan_.end(), s->blocks.begin(), s->blocks.end());
  return plan_;
}

void decode_batch_plan(std::span<const int32_t> plan, std::vector<BatchToken>& batch, std::vector<KvSequence>& seqs) {
  if (plan.size() < kCountInts) malformed("has no counts");
  if (plan[0] < 0 || plan[1] < 0 || plan[2] < 0) malformed("has a negative count");
  const auto n_tokens = static_cast<size_t>(plan[0]), n_seqs = static_cast<size_t>(plan[1]),
             n_blocks = static_cast<size_t>(plan[2]);
  if (plan.size() != kCountInts + n_tokens * kTokenInts + n_seqs + n_blocks)
    malformed("has " + std::to_string(plan.size()) + " ints, not the " +
              std::to_string(kCountInts + n_tokens * kTokenInts + n_seqs + n_blocks) + " its counts say");
  const int32_t* tokens = plan.data() + kCountInts;
  const int32_t* lengths = tokens + n_tokens * kTokenInts;
  const int32_t* blocks = lengths + n_seqs;
  seqs.assign(n_seqs, KvSequence{});
  size_t used = 0;
  for (size_t s = 0; s < n_seqs; ++s) {
    if (lengths[s] < 0 || used + static_cast<size_t>(lengths[s]) > n_blocks)
      malformed("gives sequence " + std::to_string(s) + " more block ids than it carries");
    seqs[s].blocks.assign(blocks + used, blocks + used + lengths[s]);
    used += static_cast<size_t>(lengths[s]);
  }
  batch.clear();
  for (size_t i = 0; i < n_tokens; ++i) {
    const int32_t* t = tokens + i * kTokenInts;
    if (t[2] < 0 || static_cast<size_t>(t[2]) >= n_seqs) malformed("names sequence " + std::to_string(t[2]));
    batch.push_back({.token = t[0],
                     .pos = t[1],
                     .seq = &seqs[static_cast<size_t>(t[2])],
                     .want_logits = (t[3] & kWantLogits) != 0,
                     .generated = (t[3] & kGenerated) != 0});
  }
}

}  // namespace vigil
