// `vigil-worker serve`: reads the config, applies flags over it, loads the model, and serves until
// SIGTERM or SIGINT has drained the in-flight requests.
#include "commands/serve.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "backend/select/backend_select.h"
#include "commands/serve_tp.h"
#include "model/llama_model.h"
#include "model/vocab.h"
#include "server/engine_service.h"
#include "server/http_server.h"
#include "server/serve_config.h"
#include "server/worker_metrics.h"
#include "vigil/version.h"

namespace vigil {
namespace {

// The step latency target and what calibration found; a target no step can meet is said here, at
// start, and stays visible as vigil_worker_step_latency_target_attainable 0.
void report_step_target(const StepTargetStats& t) {
  if (t.target_seconds <= 0) return;
  if (t.decode_multiple > 0)
    std::fprintf(stderr,
                 "vigil-worker: step latency target %gx the decode step of the batch%s (%.1f ms for one stream): a "
                 "decode step takes %.1f ms, a prompt token beside it %.2f ms in chunks of up to 64, a cached K/V row %.2f us "
                 "(calibrated at start, learned as it runs)\n",
                 t.decode_multiple, t.ceiling_seconds > 0 ? (", at most " + std::to_string(static_cast<int>(t.ceiling_seconds * 1e3)) + " ms").c_str() : "",
                 t.target_seconds * 1e3, t.decode_step_seconds * 1e3,
                 t.prefill_token_seconds * 1e3, t.kv_row_seconds * 1e6);
  else
    std::fprintf(stderr,
                 "vigil-worker: step latency target %.0f ms: a decode step takes %.1f ms, a prompt token beside it "
                 "%.2f ms in chunks of up to 64, a cached K/V row %.2f us (calibrated at start, learned as it runs)\n",
                 t.target_seconds * 1e3, t.decode_step_seconds * 1e3, t.prefill_token_seconds * 1e3,
                 t.kv_row_seconds * 1e6);
  if (!t.attainable)
    std::fprintf(stderr,
                 "vigil-worker: warning: engine.step_latency_target %.0f ms is below a decode-only step (%.1f ms): "
                 "steps will take longer than the target\n",
                 t.target_seconds * 1e3, t.decode_step_seconds * 1e3);
}

constexpr const char* kUsage =
    "usage: vigil-worker serve -m MODEL [--host H] [--port P] [--config FILE] [--adapter-dir DIR]\n"
    "                          [--api-key KEY] [--metrics-need-key] [--allow-runtime-adapters]\n"
    "                          [--allow-client-priority]\n"
    "\n"
    "Serves the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models), /health, /ready\n"
    "and /metrics over HTTP/1.1. SIGTERM drains: /ready turns 503, new requests are refused, running\n"
    "ones finish within server.drain_grace, then the process exits 0.\n"
    "\n"
    "  -m, --model FILE   GGUF model\n"
    "  --host H           listen address (default 127.0.0.1; overrides server.host)\n"
    "  --port P           listen port (default 8080; 0 picks a free one; overrides server.port)\n"
    "  --config FILE      YAML config with every knob (see deploy/worker.example.yaml)\n"
    "  --adapter-dir DIR  LoRA adapters may be loaded from here only (POST /v1/load_lora_adapter;\n"
    "                     overrides server.adapter_dir; default: adapter loading disabled)\n"
    "  --api-key KEY      every /v1/* route needs 'Authorization: Bearer KEY' (else 401); also\n"
    "                     VIGIL_API_KEY or server.api_key (flag over variable over file); /health,\n"
    "                     /ready and /metrics stay open. Prefer the variable: argv is world-readable\n"
    "  --metrics-need-key /metrics needs the key too (server.metrics_need_key)\n"
    "  --allow-runtime-adapters  POST /v1/load_lora_adapter and /v1/unload_lora_adapter answer\n"
    "                     (server.allow_runtime_adapters; default: 403; needs --adapter-dir too)\n"
    "  --allow-client-priority   the request field 'priority' reaches the scheduler\n"
    "                     (server.allow_client_priority; default: a request with it gets 400)\n";

struct Options {
  std::string model, config;
  std::optional<std::string> host;
  std::optional<int> port;
  TpOptions tp;
  std::optional<std::string> adapter_dir;
  std::optional<std::string> api_key;
  bool metrics_need_key = false;
  bool allow_runtime_adapters = false;
  bool allow_client_priority = false;
};

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(kTpUsage, stdout);
      std::exit(0);
    } else if (a == "-m" || a == "--model") {
      o.model = value();
    } else if (a == "--host") {
      o.host = value();
    } else if (a == "--port") {
      std::string v = value();
      char* end = nullptr;
      errno = 0;
      long p = std::strtol(v.c_str(), &end, 10);
      if (errno != 0 || end == v.c_str() || *end != '\0' || p < 0 || p > 65535)
        throw UsageError("--port: expected 0-65535, got '" + v + "'");
      o.port = static_cast<int>(p);
    } else if (a == "--config") {
      o.config = value();
    } else if (a == "--adapter-dir") {
      o.adapter_dir = value();
    } else if (a == "--api-key") {
      o.api_key = value();
      if (o.api_key->empty()) throw UsageError("--api-key: must not be empty");
    } else if (a == "--metrics-need-key") {
      o.metrics_need_key = true;
    } else if (a == "--allow-runtime-adapters") {
      o.allow_runtime_adapters = true;
    } else if (a == "--allow-client-priority") {
      o.allow_client_priority = true;
    } else if (is_tp_flag(a)) {
      try {
        parse_tp_flag(a, value(), o.tp);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
    } else {
      throw UsageError("unknown option '" + a + "'");
    }
  }
  if (o.model.empty()) throw UsageError("-m MODEL is required");
  try {
    check_tp_options(o.tp);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return o;
}

}  // namespace

int serve_command(int argc, char** argv) {
  Options o;
  ServeConfig config;
  try {
    o = parse(argc, argv);
    if (!o.config.empty()) config = load_serve_config(o.config);
    if (o.host) config.server.host = *o.host;
    if (o.port) config.server.port = *o.port;
    if (o.adapter_dir) config.server.adapter_dir = *o.adapter_dir;
    ApiAccess& access = config.server.access;
    if (const char* env = std::getenv("VIGIL_API_KEY")) {
      // Set but empty is a Secret or template gone wrong, not a wish for an open API.
      if (!*env) throw ServeConfigError("VIGIL_API_KEY", 0, "set but empty; unset it to serve /v1/* without a key");
      access.api_key = env;
    }
    if (o.api_key) access.api_key = *o.api_key;
    access.metrics_need_key = access.metrics_need_key || o.metrics_need_key;
    access.allow_runtime_adapters = access.allow_runtime_adapters || o.allow_runtime_adapters;
    access.allow_client_priority = access.allow_client_priority || o.allow_client_priority;
    check_serve_config(config);
    if (!config.server.adapter_dir.empty() && !std::filesystem::is_directory(config.server.adapter_dir))
      throw ServeConfigError("server.adapter_dir", 0, "'" + config.server.adapter_dir + "' is not a directory");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "vigil-worker serve: %s (see vigil-worker serve --help)\n", e.what());
    return 2;
  } catch (const ServeConfigError& e) {
    if (e.line() > 0)
      std::fprintf(stderr, "vigil-worker serve: %s: line %d: %s: %s\n", o.config.c_str(), e.line(), e.key().c_str(),
                   e.what());
    else
      std::fprintf(stderr, "vigil-worker serve: %s: %s\n", e.key().c_str(), e.what());
    return 2;
  }

  auto model = LlamaModel::load(o.model, weights_placement(config.backend));
  if (config.engine.max_context > model->hparams().n_ctx_train) {
    std::fprintf(stderr, "vigil-worker serve: engine.max_context: %d exceeds the model's context of %d\n",
                 config.engine.max_context, model->hparams().n_ctx_train);
    return 2;
  }
  Vocab vocab = Vocab::from_gguf(model->file());
  const std::string name = config.server.model_name.empty()
                               ? std::filesystem::path(o.model).filename().string()
                               : config.server.model_name;
  if (o.tp.world > 1 && config.backend.kind != BackendKind::kCpu) {
    std::fprintf(stderr, "vigil-worker serve: --tp: tensor parallelism runs on the CPU backend only (backend.kind: %s)\n",
                 backend_kind_name(config.backend.kind));
    return 2;
  }
  std::unique_ptr<TpGroup> tp;
  if (o.tp.world > 1) {
    tp = std::make_unique<TpGroup>(o.tp, *model, config.engine);
    if (!tp->leader()) return tp->follow(*model, config.engine);
  }
  std::unique_ptr<ForwardBackend> backend;
  try {
    backend = make_backend(config.backend, *model, backend_shape(config.engine), tp ? &tp->group() : nullptr);
  } catch (const std::exception& e) {
    // No device, no driver, a build without CUDA: the operator asked for something this host lacks.
    std::fprintf(stderr, "vigil-worker serve: backend.kind: %s: %s\n", backend_kind_name(config.backend.kind),
                 e.what());
    return 1;
  }
  const MappedFile& weights = *model->file().mapping();
  WorkerMetrics metrics(name, VIGIL_VERSION, backend->device(),
                        {weights_placement_name(weights.placement()), weights.bytes().size(), weights.pmd_mapped_bytes()});
  if (tp) tp->serve(metrics.registry());
  EngineService service(*model, vocab, config.engine, std::move(backend), config.server.adapter_dir);
  HttpServer server(service, metrics, config.server, name, true);
  report_step_target(service.stats().step_target);
  std::fprintf(stderr,
               "vigil-worker: serving %s as '%s' on http://%s:%u (%s; backend %s, weights in %s, %d engine threads, "
               "policy %s, context %d, %d KV blocks of %d)\n",
               o.model.c_str(), name.c_str(), config.server.host.c_str(), server.port(),
               config.server.access.api_key.empty() ? "/v1/* open: no API key" : "/v1/* needs the API key",
               service.backend_description().c_str(), weights.describe().c_str(),
               config.engine.threads, std::string(policy_name(config.engine.policy)).c_str(),
               config.engine.max_context, config.engine.kv_blocks, config.engine.kv_block_size);
  server.run();
  service.shutdown();  // before the server: engine events post to its I/O context
  if (tp) tp->finish();
  return 0;
}

}  // namespace vigil
