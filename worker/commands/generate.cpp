// `vigil-worker generate`: runs one prompt through the model and streams the text to stdout.
#include "commands/generate.h"

#include <cerrno>
#include <chrono>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend/select/backend_select.h"
#include "engine/generator.h"
#include "model/chat_template.h"
#include "model/llama_model.h"
#include "model/unicode.h"
#include "model/vocab.h"

namespace vigil {
namespace {

constexpr const char* kUsage =
    "usage: vigil-worker generate -m MODEL -p PROMPT [options]\n"
    "\n"
    "  -m, --model FILE          GGUF model\n"
    "  -p, --prompt TEXT         prompt (raw text, or the user message with --chat)\n"
    "  --chat                    wrap the prompt in the model's chat template\n"
    "  --system TEXT             system message (with --chat)\n"
    "  -n, --max-tokens N        tokens to generate (default 128)\n"
    "  --temp T                  temperature, 0 = greedy (default 0)\n"
    "  --top-k K, --top-p P, --min-p P\n"
    "  --repeat-penalty R, --presence-penalty P, --frequency-penalty F, --penalty-last-n N\n"
    "  --seed S                  random seed (default 0)\n"
    "  --stop TEXT               stop string (repeatable)\n"
    "  --ignore-eos              keep generating past end-of-generation tokens\n"
    "  --backend cpu|cuda        forward backend (default cpu)\n"
    "  --device N                CUDA device (default 0)\n"
    "  --weights huge_pages|page_cache  where the CPU backend reads the weights (default huge_pages)\n"
    "  -t, --threads N           CPU threads (default: all cores)\n"
    "  -c, --ctx N               context length (default: prompt + max tokens)\n"
    "  -b, --batch N             prefill chunk size (default 512)\n"
    "  --tokens                  print the generated token ids to stderr at the end\n";

struct Options {
  std::string model, prompt, system;
  bool chat = false, print_tokens = false;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  int ctx = 0, batch = 512;
  BackendConfig backend;
  GenerateOptions gen;
};

[[noreturn]] void usage_error(const std::string& msg) {
  throw std::invalid_argument(msg + " (see vigil-worker generate --help)");
}

template <typename T>
T parse_number(const std::string& flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0') usage_error(flag + ": '" + text + "' is not a number");
  if constexpr (std::is_integral_v<T>) {
    if (v != static_cast<double>(static_cast<long long>(v))) usage_error(flag + ": '" + text + "' is not an integer");
  }
  return static_cast<T>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "-m" || a == "--model") o.model = value();
    else if (a == "-p" || a == "--prompt") o.prompt = value();
    else if (a == "--system") o.system = value();
    else if (a == "--chat") o.chat = true;
    else if (a == "--tokens") o.print_tokens = true;
    else if (a == "--ignore-eos") o.gen.ignore_eos = true;
    else if (a == "-n" || a == "--max-tokens") o.gen.max_tokens = parse_number<int>(a, value());
    else if (a == "--temp") o.gen.sampling.temperature = parse_number<float>(a, value());
    else if (a == "--top-k") o.gen.sampling.top_k = parse_number<int>(a, value());
    else if (a == "--top-p") o.gen.sampling.top_p = parse_number<float>(a, value());
    else if (a == "--min-p") o.gen.sampling.min_p = parse_number<float>(a, value());
    else if (a == "--repeat-penalty") o.gen.sampling.repetition_penalty = parse_number<float>(a, value());
    else if (a == "--presence-penalty") o.gen.sampling.presence_penalty = parse_number<float>(a, value());
    else if (a == "--frequency-penalty") o.gen.sampling.frequency_penalty = parse_number<float>(a, value());
    else if (a == "--penalty-last-n") o.gen.sampling.penalty_last_n = parse_number<int>(a, value());
    else if (a == "--seed") o.gen.sampling.seed = parse_number<uint64_t>(a, value());
    else if (a == "--stop") o.gen.stop.emplace_back(value());
    else if (a == "--backend") {
      const std::string name = value();
      if (!parse_backend_kind(name, o.backend.kind)) usage_error(a + ": '" + name + "' is not cpu or cuda");
    } else if (a == "--weights") {
      const std::string name = value();
      const auto placement = parse_weights_placement(name);
      if (!placement) usage_error(a + ": '" + name + "' is not huge_pages or page_cache");
      o.backend.weights = *placement;
    } else if (a == "--device") o.backend.cuda.device = parse_number<int>(a, value());
    else if (a == "-t" || a == "--threads") o.threads = parse_number<int>(a, value());
    else if (a == "-c" || a == "--ctx") o.ctx = parse_number<int>(a, value());
    else if (a == "-b" || a == "--batch") o.batch = parse_number<int>(a, value());
    else usage_error("unknown option '" + a + "'");
  }
  if (o.model.empty()) usage_error("-m MODEL is required");
  if (o.prompt.empty()) usage_error("-p PROMPT is required");
  if (o.threads < 1 || o.threads > 256) usage_error("--threads must be in [1, 256]");
  if (o.batch < 1 || o.batch > 8192) usage_error("--batch must be in [1, 8192]");
  if (std::string err = o.gen.sampling.validate(); !err.empty()) usage_error(err);
  return o;
}

}  // namespace

int generate_command(int argc, char** argv) {
  const auto t_start = std::chrono::steady_clock::now();
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "vigil-worker generate: %s\n", e.what());
    return 2;
  }

  auto model = LlamaModel::load(o.model, weights_placement(o.backend));
  const LlamaHparams& hp = model->hparams();
  Vocab vocab = Vocab::from_gguf(model->file());

  std::vector<int32_t> prompt;
  if (o.chat) {
    std::vector<ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", o.prompt});
    prompt = encode_chat(vocab, messages, true);
  } else {
    prompt = vocab.encode(o.prompt, true);  // a raw prompt may write its own ChatML, as llama.cpp's CLI reads it
  }
  const int needed = static_cast<int>(prompt.size()) + o.gen.max_tokens;
  const int n_ctx = o.ctx > 0 ? o.ctx : needed;
  if (n_ctx > hp.n_ctx_train) {
    std::fprintf(stderr, "vigil-worker generate: context %d exceeds the model's %d\n", n_ctx, hp.n_ctx_train);
    return 2;
  }

  constexpr int kBlockSize = 16;
  const int n_blocks = (n_ctx + kBlockSize - 1) / kBlockSize;
  const BackendShape shape{std::min(o.batch, std::max(1, static_cast<int>(prompt.size()))), 1, n_ctx, n_blocks,
                           kBlockSize, o.threads};
  std::unique_ptr<ForwardBackend> backend;
  try {
    backend = make_backend(o.backend, *model, shape);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vigil-worker generate: --backend %s: %s\n", backend_kind_name(o.backend.kind), e.what());
    return 1;
  }
  KvBlockAllocator blocks(n_blocks);
  Generator generator(*backend, shape, *model, blocks, vocab);
  std::fprintf(stderr, "vigil-worker: %s, weights in %s, %zu prompt tokens, ctx %d\n", backend->describe().c_str(),
               model->file().mapping()->describe().c_str(), prompt.size(), n_ctx);

  GenerateResult r;
  try {
    r = generator.generate(prompt, o.gen, [](std::string_view piece) {
      // A generation cut at the token limit can end inside a character: U+FFFD, as the server.
      const std::string text = with_replacement_characters(piece);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "vigil-worker generate: %s\n", e.what());
    return 2;
  }
  std::fputc('\n', stdout);
  const double ttft = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count() -
                      r.decode_seconds;
  const double n_decode = static_cast<double>(r.tokens.size() > 0 ? r.tokens.size() - 1 : 0);
  std::fprintf(stderr,
               "vigil-worker: prompt %zu tokens in %.1f ms (%.1f tok/s); generated %zu tokens, "
               "%.1f tok/s; start to first token %.1f ms; finish: %s\n",
               prompt.size(), r.prefill_seconds * 1e3, static_cast<double>(prompt.size()) / r.prefill_seconds,
               r.tokens.size(), n_decode > 0 ? n_decode / r.decode_seconds : 0.0, ttft * 1e3,
               finish_reason_name(r.finish));
  if (o.print_tokens) {
    std::fputs("tokens:", stderr);
    for (int32_t t : r.tokens) std::fprintf(stderr, " %d", t);
    std::fputc('\n', stderr);
  }
  return 0;
}

}  // namespace vigil
