// Communicator and TensorParallel over real Gloo pairs on loopback: results against values
// computed here, a timeout reported as such, the leader's plans reaching the followers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "comm/gloo_communicator.h"
#include "comm/tensor_parallel.h"
#include "worker/comm/gloo_ranks.h"

namespace vigil {
namespace {

using test::run_ranks;

using namespace std::chrono_literals;

struct Recorder : CollectiveObserver {
  std::vector<std::pair<CollectiveOp, CollectiveStatus>> seen;
  void on_collective(CollectiveOp op, CollectiveStatus status, size_t, double) override { seen.push_back({op, status}); }
};

TEST(GlooCommunicator, CollectivesComputeTheirDefinitions) {
  run_ranks(2, [](GlooCommunicator& comm) {
    Recorder rec;
    comm.set_observer(&rec);
    const int r = comm.rank();
    std::vector<float> in = {float(r) + 0.5f, float(10 * r), -1.0f};
    std::vector<float> out(6);
    comm.all_gather(in.data(), in.size(), out.data(), 5s);
    EXPECT_EQ(out, (std::vector<float>{0.5f, 0.0f, -1.0f, 1.5f, 10.0f, -1.0f}));

    std::vector<float> sum = {float(r + 1), 2.0f};
    comm.all_reduce_sum(sum.data(), sum.size(), 5s);
    EXPECT_EQ(sum, (std::vector<float>{3.0f, 4.0f}));

    int32_t value[2] = {r == 0 ? 42 : -7, r == 0 ? 7 : -7};
    comm.broadcast(value, sizeof value, 0, 5s);
    EXPECT_EQ(value[0], 42);
    EXPECT_EQ(value[1], 7);

    comm.barrier(5s);
    ASSERT_EQ(rec.seen.size(), 4u);
    EXPECT_EQ(rec.seen[0].first, CollectiveOp::kAllGather);
    EXPECT_EQ(rec.seen[3].first, CollectiveOp::kBarrier);
    for (auto& [op, status] : rec.seen) EXPECT_EQ(status, CollectiveStatus::kOk) << collective_op_name(op);
  });
}

TEST(GlooCommunicator, TimeoutIsReportedNotHung) {
  run_ranks(2, [](GlooCommunicator& comm) {
    if (comm.rank() == 1) {  // never joins the collective; stays connected until rank 0 gave up
      std::this_thread::sleep_for(1500ms);
      return;
    }
    Recorder rec;
    comm.set_observer(&rec);
    float in = 1, out[2];
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.all_gather(&in, 1, out, 300ms);
      ADD_FAILURE() << "all_gather returned without its peer";
    } catch (const CollectiveError& e) {
      EXPECT_EQ(e.status(), CollectiveStatus::kTimeout) << e.what();
      EXPECT_EQ(e.op(), CollectiveOp::kAllGather);
    }
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 1400ms);
    ASSERT_EQ(rec.seen.size(), 1u);
    EXPECT_EQ(rec.seen[0].second, CollectiveStatus::kTimeout);
  });
}

TEST(TensorParallel, FollowerReceivesTheLeadersPlan) {
  const std::vector<int32_t> sent = {3, 1, 2, 11, 17, 0, 1, 12, 18, 0, 3, 2, 5, 9};
  run_ranks(2, [&](GlooCommunicator& comm) {
    TensorParallel tp(comm, 5s);
    if (tp.leader()) {
      std::vector<int32_t> plan = sent;
      { auto lock = tp.begin_forward(plan); }
      tp.send_shutdown();
      return;
    }
    std::vector<int32_t> plan;
    ASSERT_EQ(tp.receive(plan), TensorParallel::Message::kBatch);
    EXPECT_EQ(plan, sent);
    EXPECT_EQ(tp.receive(plan), TensorParallel::Message::kShutdown);
  });
}

// The probes' group id and sequence number (docs/probes.md): the same on every rank, so that the
// agent can line the ranks up; a new group draws a new id.
TEST(TensorParallel, RanksShareTheGroupIdAndNumberCollectivesAlike) {
  uint64_t ids[2][2] = {}, sequences[2] = {};
  for (int group = 0; group < 2; ++group)
    run_ranks(2, [&](GlooCommunicator& comm) {
      EXPECT_EQ(comm.group_id(), 0u);
      TensorParallel tp(comm, 5s);
      ids[group][comm.rank()] = comm.group_id();
      if (group == 0) {
        std::vector<int32_t> plan = {1, 2, 3};
        if (tp.leader()) {
          { auto lock = tp.begin_forward(plan); }
        } else {
          tp.receive(plan);
        }
        float mine = 1, all[2];
        tp.all_gather(&mine, 1, all);
        sequences[comm.rank()] = comm.sequence();
      }
    });
  EXPECT_NE(ids[0][0], 0u);
  EXPECT_EQ(ids[0][0], ids[0][1]);
  EXPECT_EQ(ids[1][0], ids[1][1]);
  EXPECT_NE(ids[0][0], ids[1][0]);
  // The id's broadcast, the header, the plan, the all_gather.
  EXPECT_EQ(sequences[0], 4u);
  EXPECT_EQ(sequences[1], 4u);
}

TEST(TensorParallel, MismatchedSettingsAreNamed) {
  run_ranks(2, [](GlooCommunicator& comm) {
    TensorParallel tp(comm, 5s);
    try {
      tp.check_same_on_all_ranks({{"n_layer", 30}, {"engine.kv_blocks", comm.rank() == 0 ? 512 : 256}});
      ADD_FAILURE() << "a mismatch passed";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("engine.kv_blocks"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace vigil
