// Adapter loading for a live server: every path is confined to the configured directory before
// the file is opened, and a file that fails validation leaves the registry as it was.
#include "engine/adapter_registry.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace vigil {
namespace {

std::string real_path(const std::string& p, int& err) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) {
    err = errno;
    return "";
  }
  err = 0;
  return buf;
}

bool under(const std::string& path, std::string dir) {
  if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir == "/") return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

// Names reach URLs, logs and metric labels: keep them short and plain.
std::string check_name(const std::string& name) {
  if (name.empty()) return "lora_name: must not be empty";
  if (name.size() > 128) return "lora_name: longer than 128 characters";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-' || c == ':' || c == '/';
    if (!ok) return "lora_name: only letters, digits and . _ - : / are allowed";
  }
  return "";
}

}  // namespace

std::string confine_adapter_path(const std::string& dir, const std::string& path, std::string& error) {
  if (path.empty()) {
    error = "lora_path: must not be empty";
    return "";
  }
  if (path.find('\0') != std::string::npos) {
    error = "lora_path: contains a NUL byte";
    return "";
  }
  for (size_t begin = 0; begin <= path.size();) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    if (path.compare(begin, end - begin, "..") == 0) {
      error = "lora_path: '..' components are not allowed";
      return "";
    }
    begin = end + 1;
  }
  int err = 0;
  const std::string real_dir = real_path(dir, err);
  if (real_dir.empty()) {
    error = "the adapter directory '" + dir + "' is unusable: " + std::strerror(err);
    return "";
  }
  const std::string outside = "lora_path: '" + path + "' is outside the adapter directory '" + dir + "'";
  // Refuse absolute paths elsewhere before touching them, so answers reveal nothing about
  // files outside the directory.
  if (path[0] == '/' && !under(path, dir) && !under(path, real_dir)) {
    error = outside;
    return "";
  }
  const std::string candidate = path[0] == '/' ? path : dir + "/" + path;
  const std::string real = real_path(candidate, err);
  if (real.empty()) {
    error = "lora_path: '" + path + "': " + std::strerror(err);
    return "";
  }
  if (!under(real, real_dir)) {  // a symlink inside the directory pointing out of it
    error = outside;
    return "";
  }
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "lora_path: '" + path + "' is not a regular file";
    return "";
  }
  return real;
}

AdapterRegistry::AdapterRegistry(const LlamaModel& model, std::string dir) : model_(model), dir_(std::move(dir)) {}

void AdapterRegistry::hold_in(AdapterMemory memory) {
  std::lock_guard lock(mu_);
  memory_ = std::move(memory);
}

AdapterResult AdapterRegistry::load(const std::string& name, const std::string& path) {
  if (std::string err = check_name(name); !err.empty()) return {AdapterStatus::kBadRequest, err};
  if (dir_.empty())
    return {AdapterStatus::kDisabled, "adapter loading is disabled: start the worker with --adapter-dir or "
                                      "server.adapter_dir"};
  AdapterMemory memory;
  {
    std::lock_guard lock(mu_);
    memory = memory_;
    if (adapters_.count(name)) return {AdapterStatus::kConflict, "adapter '" + name + "' is already loaded"};
    if (adapters_.size() >= kMaxAdapters)
      return {AdapterStatus::kFull, std::to_string(kMaxAdapters) + " adapters are loaded already; unload one first"};
  }
  std::string err;
  const std::string real = confine_adapter_path(dir_, path, err);
  if (real.empty()) return {AdapterStatus::kBadRequest, err};
  std::shared_ptr<const LoraAdapter> adapter;
  try {
    adapter = LoraAdapter::load(real, model_, memory);
  } catch (const std::exception& e) {
    return {AdapterStatus::kInvalidFile, std::string("invalid adapter file: ") + e.what()};
  }
  std::lock_guard lock(mu_);
  // A concurrent load of the same name may have won while this one read its file.
  if (!adapters_.emplace(name, std::move(adapter)).second)
    return {AdapterStatus::kConflict, "adapter '" + name + "' is already loaded"};
  return {};
}

AdapterResult AdapterRegistry::unload(const std::string& name) {
  if (name.empty()) return {AdapterStatus::kBadRequest, "lora_name: must not be empty"};
  std::shared_ptr<const LoraAdapter> last;  // released after the lock when no request holds it
  std::lock_guard lock(mu_);
  auto it = adapters_.find(name);
  if (it == adapters_.end()) return {AdapterStatus::kNotFound, "adapter '" + name + "' is not loaded"};
  last = std::move(it->second);
  adapters_.erase(it);
  return {};
}

std::shared_ptr<const LoraAdapter> AdapterRegistry::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = adapters_.find(name);
  return it == adapters_.end() ? nullptr : it->second;
}

std::vector<std::string> AdapterRegistry::names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(adapters_.size());
  for (const auto& [name, adapter] : adapters_) out.push_back(name);
  return out;
}

size_t AdapterRegistry::size() const {
  std::lock_guard lock(mu_);
  return adapters_.size();
}

size_t AdapterRegistry::bytes() const {
  std::lock_guard lock(mu_);
  size_t total = 0;
  for (const auto& [name, adapter] : adapters_) total += adapter->bytes();
  return total;
}

}  // namespace vigil
