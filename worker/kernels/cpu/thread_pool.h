// Persistent worker threads for the CPU kernels: one parallel_for per operation, no allocation.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace vigil {

class ThreadPool {
 public:
  // n_threads counts the calling thread, which always takes part in parallel_for.
  explicit ThreadPool(int n_threads);
  // spin_before_sleep: how long an idle thread polls for work before it blocks. Polling spares
  // the futex wake-up between the back-to-back parallel_for calls of a layer; but a spinning
  // thread uses up its CPU share, and on cores shared with other busy processes the scheduler
  // then preempts it in the middle of a task, stalling the whole matmul. Measured on the 2-core
  // dev machine under load ~5 (decode-step matmuls, 2 threads): 0 µs 11.8–14.0 ms, 10 µs
  // 9.0–13.0 ms, 100 µs 16–17.6 ms, 1 ms 15.6–18.6 ms; one thread 10.8–11.3 ms. A dedicated
  // machine may prefer a longer spin.
  ThreadPool(int n_threads, std::chrono::microseconds spin_before_sleep);
  static constexpr std::chrono::microseconds kDefaultSpin{10};
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread) for every task in [0, n_tasks), spread over the threads; returns when
  // all are done. Tasks are claimed dynamically. Never allocates. One caller at a time (no nested
  // or concurrent calls on the same pool); fn must not throw.
  template <typename F>
  void parallel_for(int n_tasks, F&& fn) {
    run(n_tasks, &trampoline<std::remove_reference_t<F>>, &fn);
  }

 private:
  using TaskFn = void (*)(void* ctx, int task, int thread);
  template <typename F>
  static void trampoline(void* ctx, int task, int thread) {
    (*static_cast<F*>(ctx))(task, thread);
  }
  void run(int n_tasks, TaskFn fn, void* ctx);
  void worker_loop(int thread);
  // Claims and runs tasks of job `generation` until none is left or a newer job replaced it.
  void drain(int thread, uint32_t generation);
  // Spins, then sleeps, until a job other than `seen_generation` is open and stores its
  // generation; false once the pool is stopping.
  bool wait_for_job(uint32_t seen_generation, uint32_t* generation);
  void wait_until_done(int n_tasks);

  int n_threads_;
  std::chrono::microseconds spin_before_sleep_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;  // workers that stopped spinning wait here for a job
  std::condition_variable done_;  // the caller, when the last tasks run long, waits here
  // job_ = generation << 32 | index of the next unclaimed task. A claim is a compare-and-swap of
  // the whole word, so a worker that still holds an older generation can never claim a task of a
  // newer job; kJobClosed in the index marks a job whose fields are being written.
  std::atomic<uint64_t> job_{0};
  std::atomic<TaskFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int> n_tasks_{0};
  std::atomic<int> tasks_done_{0};
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace vigil
