// Persistent worker threads for the CPU kernels: one parallel_for per operation, no allocation.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace vigil {

class ThreadPool {
 public:
  // n_threads counts the calling thread, which always takes part in parallel_for.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread) for every task in [0, n_tasks), spread over the threads; returns when
  // all are done. Tasks are claimed dynamically. Never allocates.
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
  void drain(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;  // bumped per parallel_for; workers wait for a new one
  bool stop_ = false;
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int n_tasks_ = 0;
  std::atomic<int> next_task_{0};
  int active_ = 0;  // workers still inside the current generation
};

}  // namespace vigil
