// Runs a test body on N ranks of a real Gloo group over loopback, each a thread of the test
// process with its own communicator (the comm and the CPU backend's tensor-parallel tests).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/gloo_communicator.h"

namespace vigil::test {

using namespace std::chrono_literals;

inline std::string fresh_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "vigil-comm-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

// Runs body(comm) on `world` ranks, each a thread with its own communicator.
inline void run_ranks(int world, const std::function<void(GlooCommunicator&)>& body) {
  const std::string dir = fresh_dir();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooOptions o;
        o.rank = r;
        o.world = world;
        o.store_dir = dir;
        o.host = "127.0.0.1";
        o.connect_timeout = 20s;
        GlooCommunicator comm(o);
        body(comm);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::filesystem::remove_all(dir);
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

}  // namespace vigil::test
