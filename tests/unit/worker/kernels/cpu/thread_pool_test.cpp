// ThreadPool: every task runs exactly once, on a valid thread, across many calls and sleeps.
#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace vigil {
namespace {

void expect_each_task_once(ThreadPool& pool, int n_tasks) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(n_tasks));
  std::atomic<int> bad_thread{0};
  pool.parallel_for(n_tasks, [&](int task, int thread) {
    runs[static_cast<size_t>(task)].fetch_add(1);
    if (thread < 0 || thread >= pool.size()) bad_thread.fetch_add(1);
  });
  for (int t = 0; t < n_tasks; ++t) ASSERT_EQ(runs[static_cast<size_t>(t)].load(), 1) << "task " << t;
  EXPECT_EQ(bad_thread.load(), 0);
}

TEST(ThreadPool, SizeCountsTheCaller) {
  EXPECT_EQ(ThreadPool(1).size(), 1);
  EXPECT_EQ(ThreadPool(3).size(), 3);
  EXPECT_EQ(ThreadPool(0).size(), 1);
}

TEST(ThreadPool, EveryTaskExactlyOnceForOneAndManyThreads) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int n : {0, 1, 2, 3, 7, 64, 1000}) expect_each_task_once(pool, n);
  }
}

TEST(ThreadPool, ManyBackToBackCallsStayCorrect) {
  for (auto spin : {std::chrono::microseconds(0), ThreadPool::kDefaultSpin}) {
    ThreadPool pool(3, spin);
    std::atomic<long> total{0};
    long expected = 0;
    for (int call = 0; call < 5000; ++call) {
      const int n = 1 + call % 9;
      pool.parallel_for(n, [&](int task, int) { total.fetch_add(task + 1); });
      expected += n * (n + 1) / 2;
    }
    EXPECT_EQ(total.load(), expected) << "spin " << spin.count() << " us";
  }
}

TEST(ThreadPool, WorkersThatFellAsleepWakeForTheNextJob) {
  ThreadPool pool(2, std::chrono::microseconds(50));
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin budget
    expect_each_task_once(pool, 50);
  }
}

TEST(ThreadPool, WorkersShareTheWork) {
  // A task that blocks until another thread also runs one proves the workers take part.
  ThreadPool pool(2);
  std::atomic<int> started{0};
  std::atomic<bool> other_thread_seen{false};
  pool.parallel_for(2, [&](int, int thread) {
    started.fetch_add(1);
    if (thread != 0) other_thread_seen = true;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (started.load() < 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  });
  EXPECT_EQ(started.load(), 2);
  EXPECT_TRUE(other_thread_seen.load());
}

TEST(ThreadPool, LongTasksLetTheCallerSleepAndWakeCorrectly) {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  pool.parallel_for(4, [&](int, int) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), 4);
}

}  // namespace
}  // namespace vigil
