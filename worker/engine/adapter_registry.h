// The LoRA adapters loaded into a running worker, by name: loaded and unloaded at run time from a
// confined directory, shared with the requests that use them.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/llama_model.h"
#include "model/lora_adapter.h"

namespace vigil {

enum class AdapterStatus {
  kOk,
  kBadRequest,   // malformed name or path, or a path outside the adapter directory
  kDisabled,     // no adapter directory configured
  kNotFound,     // unload of a name that is not loaded
  kConflict,     // load of a name already loaded
  kInvalidFile,  // the file is not a valid adapter for this model
  kFull,         // kMaxAdapters already loaded
};

struct AdapterResult {
  AdapterStatus status = AdapterStatus::kOk;
  std::string message;  // otherwise: what is wrong, for the client
};

// Bounds memory and the per-adapter metric series.
inline constexpr size_t kMaxAdapters = 64;

// `path` resolved inside `dir`: relative paths are taken from `dir`; `..` components are refused
// outright; the result, symlinks resolved with realpath, must lie under realpath(dir).
// Returns the resolved path, or an empty string with `error` set.
std::string confine_adapter_path(const std::string& dir, const std::string& path, std::string& error);

class AdapterRegistry {
 public:
  // `dir` empty: loading is disabled. Thread-safe throughout.
  AdapterRegistry(const LlamaModel& model, std::string dir);
  // Where adapters loaded from now on hold their tensor data (the engine's backend sets it).
  void hold_in(AdapterMemory memory);

  // Reads and validates outside the lock, so requests and other loads go on meanwhile.
  AdapterResult load(const std::string& name, const std::string& path);
  // Requests already running on the adapter keep it alive until they finish.
  AdapterResult unload(const std::string& name);
  // The adapter, or nullptr when `name` is not loaded.
  std::shared_ptr<const LoraAdapter> find(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t size() const;
  size_t bytes() const;  // tensor data of every loaded adapter

 private:
  const LlamaModel& model_;
  std::string dir_;
  mutable std::mutex mu_;
  AdapterMemory memory_;
  std::map<std::string, std::shared_ptr<const LoraAdapter>, std::less<>> adapters_;
};

}  // namespace vigil
