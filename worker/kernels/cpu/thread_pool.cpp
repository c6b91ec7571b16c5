// Persistent worker threads for the CPU kernels: lock-free task claiming, spin-then-sleep waits.
#include "kernels/cpu/thread_pool.h"

#include <immintrin.h>

#include <chrono>

namespace vigil {
namespace {

constexpr uint32_t kJobClosed = 0xffffffffu;

// Spin iterations between clock reads (each iteration is one pause, tens of cycles).
constexpr int kSpinsPerClockRead = 64;

uint32_t generation_of(uint64_t job) { return static_cast<uint32_t>(job >> 32); }
uint32_t index_of(uint64_t job) { return static_cast<uint32_t>(job); }

// Calls poll() with pauses in between until it returns true or the spin budget is spent (at least
// one round, so a zero budget still catches work that is already there).
template <typename Poll>
bool spin_until(std::chrono::microseconds budget, Poll&& poll) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < kSpinsPerClockRead; ++i) {
      if (poll()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : ThreadPool(n_threads, kDefaultSpin) {}

ThreadPool::ThreadPool(int n_threads, std::chrono::microseconds spin_before_sleep)
    : n_threads_(n_threads < 1 ? 1 : n_threads), spin_before_sleep_(spin_before_sleep) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  for (auto& w : workers_) w.join();
}

void ThreadPool::run(int n_tasks, TaskFn fn, void* ctx) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {  // nothing to share: skip the hand-off entirely
    for (int task = 0; task < n_tasks; ++task) fn(ctx, task, 0);
    return;
  }
  // Only this thread writes the generation, so a relaxed read of our own last store is exact.
  const uint32_t generation = generation_of(job_.load(std::memory_order_relaxed)) + 1;
  const uint64_t base = static_cast<uint64_t>(generation) << 32;
  job_.store(base | kJobClosed);  // no claim can succeed while the fields change
  fn_.store(fn, std::memory_order_release);
  ctx_.store(ctx, std::memory_order_release);
  n_tasks_.store(n_tasks, std::memory_order_release);
  tasks_done_.store(0, std::memory_order_relaxed);
  job_.store(base);  // seq_cst: ordered before the sleeper check below (pairs with wait_for_job)
  if (sleeping_workers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
  drain(0, generation);
  wait_until_done(n_tasks);
}

void ThreadPool::drain(int thread, uint32_t generation) {
  uint64_t job = job_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(job) != generation) return;
    const uint32_t index = index_of(job);
    // If this reads a newer job's count, that job closed the word first and the CAS fails.
    const int n_tasks = n_tasks_.load(std::memory_order_acquire);
    if (index >= static_cast<uint32_t>(n_tasks)) return;
    if (!job_.compare_exchange_weak(job, job + 1, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      continue;  // job now holds the current value
    }
    // The claim succeeded, so this generation is live until our task is counted as done.
    fn_.load(std::memory_order_acquire)(ctx_.load(std::memory_order_acquire),
                                        static_cast<int>(index), thread);
    if (tasks_done_.fetch_add(1) + 1 == n_tasks && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_one();
    }
    job = job_.load(std::memory_order_acquire);
  }
}

void ThreadPool::wait_until_done(int n_tasks) {
  auto all_done = [&] { return tasks_done_.load(std::memory_order_acquire) == n_tasks; };
  if (spin_until(spin_before_sleep_, all_done)) return;
  std::unique_lock<std::mutex> lock(mu_);
  caller_sleeping_.store(true);  // seq_cst: a worker finishing now either sees it or we see its count
  done_.wait(lock, [&] { return tasks_done_.load() == n_tasks; });
  caller_sleeping_.store(false);
}

bool ThreadPool::wait_for_job(uint32_t seen_generation, uint32_t* generation) {
  auto job_open = [&] {
    const uint64_t job = job_.load(std::memory_order_acquire);
    if (generation_of(job) == seen_generation || index_of(job) == kJobClosed) return false;
    *generation = generation_of(job);
    return true;
  };
  for (;;) {
    if (spin_until(spin_before_sleep_, [&] { return stop_.load(std::memory_order_relaxed) || job_open(); })) {
      return !stop_.load();
    }
    std::unique_lock<std::mutex> lock(mu_);
    sleeping_workers_.fetch_add(1);  // seq_cst: pairs with the publish-then-check in run()
    wake_.wait(lock, [&] {
      return stop_.load() || generation_of(job_.load()) != seen_generation;
    });
    sleeping_workers_.fetch_sub(1);
    if (stop_.load()) return false;
    // A new generation was published; it may still be closed for a moment, so spin again.
  }
}

void ThreadPool::worker_loop(int thread) {
  uint32_t generation = 0;
  while (wait_for_job(generation, &generation)) drain(thread, generation);
}

}  // namespace vigil
