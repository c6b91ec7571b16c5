// A scripted ModelService for the HTTP tests: one token per byte, deterministic text, events
// from its own thread like the real engine's, and a record of every cancel.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "server/model_service.h"

namespace vigil::test {

class FakeModelService final : public ModelService {
 public:
  explicit FakeModelService(std::chrono::milliseconds step = std::chrono::milliseconds(1)) : step_(step) {
    config_.max_context = 64;
    config_.max_waiting = 4;
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeModelService() override { stop(); }

  // Joins the event thread and drops unfinished requests (their sinks with them).
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    active_.clear();
  }

  std::vector<int32_t> tokenize(std::string_view text) const override {
    ++tokenizing;
    std::this_thread::sleep_for(std::chrono::milliseconds(tokenize_ms.load()));
    --tokenizing;
    return {text.begin(), text.end()};
  }
  std::vector<int32_t> tokenize_chat(const std::vector<ChatTurn>& messages) const override {
    std::vector<int32_t> out;
    for (const auto& m : messages) {
      std::string line = m.role + ":" + m.content + "\n";
      out.insert(out.end(), line.begin(), line.end());
    }
    return out;
  }
  int vocab_size() const override { return 256; }
  std::vector<std::string> adapters() const override { return {"fake-adapter"}; }

  SubmitResult submit(RequestParams params, EventSink sink) override {
    if (throw_on_submit) throw std::runtime_error("engine thread is gone");
    std::lock_guard lock(mu_);
    if (draining_) return {SubmitStatus::kDraining, 0, "draining"};
    if (static_cast<int>(active_.size()) >= config_.max_waiting) return {SubmitStatus::kQueueFull, 0, "4 waiting"};
    uint64_t id = next_id_++;
    last_priority_ = params.priority;
    active_[id] = Request{std::move(params), std::move(sink), 0, false};
    wake_.notify_all();
    return {SubmitStatus::kAccepted, id, ""};
  }
  void cancel(uint64_t id) override {
    std::lock_guard lock(mu_);
    cancelled_.insert(id);
    if (auto it = active_.find(id); it != active_.end()) it->second.cancel = true;
    wake_.notify_all();
  }
  void drain() override {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  EngineStats stats() const override {
    std::lock_guard lock(mu_);
    EngineStats s;
    s.running = static_cast<int>(active_.size());
    s.kv_blocks_total = 100;
    s.kv_blocks_free = 100 - s.running;
    s.preemptions = 3;
    return s;
  }
  const EngineConfig& config() const override { return config_; }

  bool was_cancelled(uint64_t id) const {
    std::lock_guard lock(mu_);
    return cancelled_.count(id) > 0;
  }
  // Blocks until no request is active (the test's way to wait for the engine, never by time).
  void wait_idle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return active_.empty(); });
  }
  // Requests accepted so far, and the priority the last one carried.
  size_t submitted() const {
    std::lock_guard lock(mu_);
    return static_cast<size_t>(next_id_ - 1);
  }
  int last_priority() const {
    std::lock_guard lock(mu_);
    return last_priority_;
  }
  size_t active() const {
    std::lock_guard lock(mu_);
    return active_.size();
  }

  // The text the fake generates for `prompt` in `n` tokens: letters derived from the prompt.
  static std::string expected_text(const std::vector<int32_t>& prompt, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += static_cast<char>('a' + (prompt.front() + i) % 26);
    return s;
  }

  // While paused no request makes progress: tests hold requests in flight without timing.
  void set_paused(bool paused) {
    {
      std::lock_guard lock(mu_);
      paused_ = paused;
    }
    wake_.notify_all();
  }

  std::atomic<bool> throw_on_submit{false};
  std::atomic<int> tokenize_ms{0};  // a slow tokenizer: how long each prompt takes
  mutable std::atomic<int> tokenizing{0};
  std::atomic<size_t> text_repeat{1};      // each token's text repeated: big streams for slow-client tests
  std::atomic<bool> fail_requests{false};  // end every request with kError after one token

 private:
  struct Request {
    RequestParams params;
    EventSink sink;
    int produced;
    bool cancel;
  };

  void loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (active_.empty()) idle_.notify_all();
      if (active_.empty() || paused_) {
        wake_.wait(lock, [&] { return stop_ || (!active_.empty() && !paused_) || (paused_ && has_cancel()); });
        if (paused_ && !has_cancel()) continue;
      }
      for (auto it = active_.begin(); it != active_.end();) {
        Request& r = it->second;
        if (paused_ && !r.cancel) {
          ++it;
          continue;
        }
        RequestEvent ev;
        ev.prompt_tokens = static_cast<int>(r.params.prompt.size());
        if (r.produced == 0) ev.queue_seconds = 0.001;
        if (r.cancel) {
          ev.finish = FinishReason::kCancelled;
        } else {
          ev.text = expected_text(r.params.prompt, r.produced + 1).substr(static_cast<size_t>(r.produced));
          ev.tokens = {static_cast<int32_t>(ev.text[0])};
          ev.text = std::string(text_repeat, ev.text[0]);
          ++r.produced;
          if (fail_requests) {
            ev.finish = FinishReason::kError;
            ev.error = "scripted failure";
          } else if (r.produced >= r.params.max_tokens) {
            ev.finish = FinishReason::kLength;
          }
        }
        ev.completion_tokens = r.produced;
        r.sink(ev);
        it = ev.finish != FinishReason::kNone ? active_.erase(it) : std::next(it);
      }
      lock.unlock();
      std::this_thread::sleep_for(step_);
      lock.lock();
    }
  }

  bool has_cancel() const {
    for (const auto& [id, r] : active_)
      if (r.cancel) return true;
    return false;
  }

  std::chrono::milliseconds step_;
  EngineConfig config_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::map<uint64_t, Request> active_;
  std::set<uint64_t> cancelled_;
  uint64_t next_id_ = 1;
  int last_priority_ = 0;
  bool draining_ = false;
  bool paused_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace vigil::test
