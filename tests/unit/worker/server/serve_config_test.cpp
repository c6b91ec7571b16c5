// Tests for the serve YAML config: defaults, every section, and errors naming key and line.
#include "server/serve_config.h"

#include <fstream>

#include <gtest/gtest.h>

namespace vigil {
namespace {

ServeConfigError error_of(const std::string& yaml) {
  try {
    parse_serve_config(yaml);
  } catch (const ServeConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return ServeConfigError("", 0, "");
}

TEST(ServeConfig, EmptyDocumentIsDefaults) {
  ServeConfig c = parse_serve_config("");
  EXPECT_EQ(c.server.host, "127.0.0.1");
  EXPECT_EQ(c.server.port, 8080);
  EXPECT_EQ(c.engine.policy, PolicyKind::kTokenBudget);  // serving_engine_defaults, not a bare engine's
  EXPECT_TRUE(c.engine.step_latency_target.on());
}

TEST(ServeConfig, ParsesEveryKey) {
  ServeConfig c = parse_serve_config(R"(
server:
  host: 0.0.0.0
  port: 9000
  model_name: smol
  io_threads: 2
  max_connections: 10
  max_header_bytes: 4096
  max_body_bytes: 2048
  read_timeout: 5s
  idle_timeout: 250ms
  write_timeout: 2m
  stream_queue_chunks: 7
  drain_grace: 12s
  retry_after_seconds: 3
  probe_connections: 5
  max_connections_per_client: 6
  parse_threads: 4
  max_queued_parses: 9
  api_key: k3y
  metrics_need_key: true
  allow_runtime_adapters: true
  allow_client_priority: true
engine:
  threads: 3
  kv_blocks: 100
  kv_block_size: 32
  max_context: 1024
  max_running: 8
  max_batched_tokens: 128
  max_waiting: 9
  batch_window_ms: 2.5
  policy: token_budget
  step_latency_target: 80ms
  max_prefill_chunk: 5
)");
  EXPECT_EQ(c.server.host, "0.0.0.0");
  EXPECT_EQ(c.server.port, 9000);
  EXPECT_EQ(c.server.model_name, "smol");
  EXPECT_EQ(c.server.io_threads, 2);
  EXPECT_EQ(c.server.max_connections, 10);
  EXPECT_EQ(c.server.max_header_bytes, 4096u);
  EXPECT_EQ(c.server.max_body_bytes, 2048u);
  EXPECT_EQ(c.server.read_timeout.count(), 5000);
  EXPECT_EQ(c.server.idle_timeout.count(), 250);
  EXPECT_EQ(c.server.write_timeout.count(), 120000);
  EXPECT_EQ(c.server.stream_queue_chunks, 7u);
  EXPECT_EQ(c.server.drain_grace.count(), 12000);
  EXPECT_EQ(c.server.retry_after_seconds, 3);
  EXPECT_EQ(c.server.probe_connections, 5);
  EXPECT_EQ(c.server.max_connections_per_client, 6);
  EXPECT_EQ(c.server.parse_threads, 4);
  EXPECT_EQ(c.server.max_queued_parses, 9);
  EXPECT_EQ(c.server.access.api_key, "k3y");
  EXPECT_TRUE(c.server.access.metrics_need_key);
  EXPECT_TRUE(c.server.access.allow_runtime_adapters);
  EXPECT_TRUE(c.server.access.allow_client_priority);
  EXPECT_EQ(c.engine.threads, 3);
  EXPECT_EQ(c.engine.kv_blocks, 100);
  EXPECT_EQ(c.engine.kv_block_size, 32);
  EXPECT_EQ(c.engine.max_context, 1024);
  EXPECT_EQ(c.engine.max_running, 8);
  EXPECT_EQ(c.engine.max_batched_tokens, 128);
  EXPECT_EQ(c.engine.max_waiting, 9);
  EXPECT_DOUBLE_EQ(c.engine.batch_window_ms, 2.5);
  EXPECT_EQ(c.engine.policy, PolicyKind::kTokenBudget);
  EXPECT_EQ(c.engine.step_latency_target.fixed.count(), 80);
  EXPECT_EQ(c.engine.step_latency_target.decode_multiple, 0.0);
  EXPECT_EQ(c.engine.max_prefill_chunk, 5);
}

TEST(ServeConfig, StepLatencyTargetIsAutoOffADurationOrAMultipleOfTheDecodeStep) {
  auto target = [](const std::string& v) {
    return parse_serve_config("engine:\n  step_latency_target: " + v + "\n").engine.step_latency_target;
  };
  // Smooth unless told otherwise: auto when the config is silent.
  const StepLatencyTarget by_default = parse_serve_config("").engine.step_latency_target;
  EXPECT_EQ(by_default.decode_multiple, StepLatencyTarget::kAutoMultiple);
  EXPECT_EQ(by_default.ceiling, StepLatencyTarget::kAutoCeiling);
  EXPECT_EQ(by_default.fixed.count(), 0);
  // auto: five decode steps of the batch, at most 100 ms.
  EXPECT_EQ(target("auto").decode_multiple, 5.0);
  EXPECT_EQ(target("auto").ceiling.count(), 100);
  EXPECT_EQ(target("auto").fixed.count(), 0);
  EXPECT_FALSE(target("off").on());
  EXPECT_EQ(target("3x").decode_multiple, 3.0);
  EXPECT_EQ(target("3x").ceiling.count(), 0);  // what was asked for, uncapped
  EXPECT_EQ(target("1.5x").decode_multiple, 1.5);
  EXPECT_EQ(target("100x").decode_multiple, 100.0);
  EXPECT_EQ(target("50ms").fixed.count(), 50);
  EXPECT_EQ(target("50ms").decode_multiple, 0.0);
  EXPECT_EQ(target("50ms").ceiling.count(), 0);
  EXPECT_TRUE(target("2x").on());
  struct Bad {
    const char* value;
    const char* says;
  };
  for (const Bad& bad : {Bad{"1x", "above 1x"}, Bad{"0.5x", "above 1x"}, Bad{"101x", "at most 100x"},
                         Bad{"x", "like 2x"}, Bad{"2.x5x", "like 2x"}, Bad{"-2x", "like 2x"}, Bad{"2 x", "like 2x"}, Bad{"1e1x", "like 2x"},
                         Bad{"0x10x", "like 2x"}, Bad{"2.x", "like 2x"},
                         Bad{"Auto", "expected auto, off"}, Bad{"fast", "expected auto, off"}, Bad{"Off", "expected auto, off"}, Bad{"0ms", "positive"},
                         Bad{"50us", "duration"}}) {
    auto e = error_of(std::string("engine:\n  threads: 2\n  step_latency_target: ") + bad.value + "\n");
    EXPECT_EQ(e.key(), "engine.step_latency_target") << bad.value;
    EXPECT_EQ(e.line(), 3) << bad.value;
    EXPECT_NE(std::string(e.what()).find(bad.says), std::string::npos) << bad.value << ": " << e.what();
  }
  EXPECT_EQ(error_of("engine:\n  max_prefill_chunk: -1\n").key(), "engine.max_prefill_chunk");
}

TEST(ServeConfig, UnknownKeyNamesKeyAndLine) {
  auto e = error_of("server:\n  port: 80\n  colour: blue\n");
  EXPECT_EQ(e.key(), "server.colour");
  EXPECT_EQ(e.line(), 3);
  e = error_of("servr:\n  port: 80\n");
  EXPECT_EQ(e.key(), "servr");
  EXPECT_EQ(e.line(), 1);
}

TEST(ServeConfig, BadValuesNameKeyAndLine) {
  auto e = error_of("server:\n  port: 70000\n");
  EXPECT_EQ(e.key(), "server.port");
  EXPECT_EQ(e.line(), 2);
  e = error_of("engine:\n  threads: 2\n  policy: lifo\n");
  EXPECT_EQ(e.key(), "engine.policy");
  EXPECT_EQ(e.line(), 3);
  EXPECT_NE(std::string(e.what()).find("lifo"), std::string::npos);
  e = error_of("server:\n  read_timeout: soon\n");
  EXPECT_EQ(e.key(), "server.read_timeout");
  e = error_of("engine:\n  kv_blocks: 1.5\n");
  EXPECT_EQ(e.key(), "engine.kv_blocks");
  e = error_of("server:\n  host: [a, b]\n");
  EXPECT_EQ(e.key(), "server.host");
  e = error_of("engine:\n  step_latency_target: 0s\n");  // off is spelled off (or left out)
  EXPECT_EQ(e.key(), "engine.step_latency_target");
  EXPECT_NE(std::string(e.what()).find("positive"), std::string::npos);
  e = error_of("engine: 3\n");
  EXPECT_EQ(e.key(), "engine");
}

TEST(ServeConfig, SyntaxErrorHasALine) {
  auto e = error_of("server:\n  port: [1, 2\n");
  EXPECT_EQ(e.key(), "<document>");
  EXPECT_GT(e.line(), 0);
}

TEST(ServeConfig, ContextMustFitTheCache) {
  auto e = error_of("engine:\n  kv_blocks: 4\n  kv_block_size: 16\n  max_context: 100\n");
  EXPECT_EQ(e.key(), "engine.max_context");
}

TEST(ServeConfig, ShippedExampleParses) {
  ServeConfig c = load_serve_config(VIGIL_SOURCE_DIR "/deploy/worker.example.yaml");
  EXPECT_EQ(c.server.port, 8080);
  EXPECT_EQ(c.backend.kind, BackendKind::kCpu);
  EXPECT_TRUE(c.backend.cuda.graphs);
}

TEST(ServeConfig, BackendSection) {
  ServeConfig c = parse_serve_config(R"(
backend:
  kind: cuda
  cuda:
    device: 1
    graphs: false
    graph_buckets: [1, 4, 16]
    memory: vmm
    matmul: cublas
)");
  EXPECT_EQ(c.backend.kind, BackendKind::kCuda);
  EXPECT_EQ(c.backend.cuda.device, 1);
  EXPECT_FALSE(c.backend.cuda.graphs);
  EXPECT_EQ(c.backend.cuda.graph_buckets, (std::vector<int>{1, 4, 16}));
  EXPECT_TRUE(c.backend.cuda.vmm);
  EXPECT_EQ(c.backend.cuda.matmul, CudaMatmul::kCublas);
  EXPECT_EQ(parse_serve_config("").backend.kind, BackendKind::kCpu);
}

TEST(ServeConfig, BackendErrorsNameTheKey) {
  auto e = error_of("backend:\n  kind: tpu\n");
  EXPECT_EQ(e.key(), "backend.kind");
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(std::string(e.what()).find("tpu"), std::string::npos);
  e = error_of("backend:\n  cuda:\n    memory: managed\n");
  EXPECT_EQ(e.key(), "backend.cuda.memory");
  EXPECT_EQ(e.line(), 3);
  e = error_of("backend:\n  cuda:\n    graph_buckets: [1, 0]\n");
  EXPECT_EQ(e.key(), "backend.cuda.graph_buckets[1]");
  e = error_of("backend:\n  cuda:\n    graph_buckets: 8\n");
  EXPECT_EQ(e.key(), "backend.cuda.graph_buckets");
  e = error_of("backend:\n  cuda:\n    graphs: maybe\n");
  EXPECT_EQ(e.key(), "backend.cuda.graphs");
  e = error_of("backend:\n  cuda:\n    streams: 2\n");
  EXPECT_EQ(e.key(), "backend.cuda.streams");
  e = error_of("engine:\n  max_running: 8\nbackend:\n  cuda:\n    graph_buckets: [4, 32]\n");
  EXPECT_EQ(e.key(), "backend.cuda.graph_buckets");
}

TEST(ServeConfig, MissingFileIsAnError) {
  EXPECT_THROW(load_serve_config("/nonexistent/worker.yaml"), ServeConfigError);
}

TEST(ServeConfig, Durations) {
  EXPECT_EQ(parse_duration("15").count(), 15000);
  EXPECT_EQ(parse_duration("15ms").count(), 15);
  EXPECT_EQ(parse_duration("2m").count(), 120000);
  EXPECT_THROW(parse_duration("2h"), std::invalid_argument);
  EXPECT_THROW(parse_duration("ms"), std::invalid_argument);
}

TEST(ServeConfig, AccessIsClosedByDefaultAndMetricsKeyNeedsAKey) {
  ServeConfig c = parse_serve_config("");
  EXPECT_TRUE(c.server.access.api_key.empty());
  EXPECT_FALSE(c.server.access.allow_runtime_adapters);
  EXPECT_FALSE(c.server.access.allow_client_priority);
  try {
    parse_serve_config("server:\n  metrics_need_key: true\n");
    FAIL() << "metrics_need_key without api_key accepted";
  } catch (const ServeConfigError& e) {
    EXPECT_EQ(e.key(), "server.metrics_need_key");
  }
  EXPECT_THROW(parse_serve_config("server:\n  api_key: ''\n"), ServeConfigError);
}

// Header values are trimmed: a key with whitespace or control bytes (a trailing newline from a
// file) could never match, so it is refused at start rather than locking every client out.
TEST(ServeConfig, AKeyWithWhitespaceOrControlBytesIsRefused) {
  for (const char* key : {"\"s3cret\\n\"", "\"s3 cret\"", "\" s3cret\"", "\"s3cret\\t\"", "\"s3\\x7fcret\""}) {
    try {
      parse_serve_config(std::string("server:\n  api_key: ") + key + "\n");
      ADD_FAILURE() << "accepted api_key " << key;
    } catch (const ServeConfigError& e) {
      EXPECT_EQ(e.key(), "server.api_key") << key;
    }
  }
  EXPECT_EQ(parse_serve_config("server:\n  api_key: s3cret-K_ey.~+/=\n").server.access.api_key, "s3cret-K_ey.~+/=");
}

}  // namespace
}  // namespace vigil
