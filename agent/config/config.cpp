// Parses the agent's YAML config strictly: unknown keys and bad values name the key and its line.
#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace vigil::agent {
namespace {

int line_of(const YAML::Node& node) { return node.Mark().line + 1; }

[[noreturn]] void fail(const std::string& key, const YAML::Node& node, const std::string& what) {
  throw ConfigError(key, line_of(node), what);
}

std::string scalar(const std::string& key, const YAML::Node& node) {
  if (!node.IsScalar()) fail(key, node, "expected a scalar value");
  return node.Scalar();
}

bool boolean(const std::string& key, const YAML::Node& node) {
  std::string v = scalar(key, node);
  if (v == "true" || v == "on" || v == "yes") return true;
  if (v == "false" || v == "off" || v == "no") return false;
  fail(key, node, "expected true or false, got '" + v + "'");
}

std::chrono::milliseconds duration(const std::string& key, const YAML::Node& node) {
  std::string v = scalar(key, node);
  try {
    auto d = parse_duration(v);
    if (d.count() <= 0) fail(key, node, "must be positive, got '" + v + "'");
    return d;
  } catch (const std::invalid_argument&) {
    fail(key, node, "expected a duration like 500ms, 5s, 2m, got '" + v + "'");
  }
}

int integer(const std::string& key, const YAML::Node& node, int lo, int hi) {
  std::string v = scalar(key, node);
  size_t used = 0;
  long n = 0;
  try {
    n = std::stol(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || n < lo || n > hi)
    fail(key, node, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "], got '" + v + "'");
  return static_cast<int>(n);
}

std::vector<std::string> paths(const std::string& key, const YAML::Node& node) {
  if (!node.IsSequence()) fail(key, node, "expected a list of paths");
  std::vector<std::string> out;
  for (const auto& item : node) {
    std::string p = scalar(key, item);
    if (p.empty() || p[0] != '/') fail(key, item, "expected an absolute path, got '" + p + "'");
    out.push_back(p);
  }
  return out;
}

using Handler = std::function<void(const std::string& key, const YAML::Node& value)>;

// Walks a mapping, dispatching each key to its handler; any other key is an error.
void walk(const std::string& prefix, const YAML::Node& node,
          const std::map<std::string, Handler>& handlers) {
  if (!node.IsMap()) fail(prefix.empty() ? "<document>" : prefix, node, "expected a mapping");
  for (const auto& kv : node) {
    std::string name = kv.first.Scalar();
    std::string key = prefix.empty() ? name : prefix + "." + name;
    auto it = handlers.find(name);
    if (it == handlers.end()) fail(key, kv.first, "unknown key");
    it->second(key, kv.second);
  }
}

}  // namespace

ConfigError::ConfigError(const std::string& key, int line, const std::string& what)
    : std::runtime_error(what), key_(key), line_(line) {}

std::chrono::milliseconds parse_duration(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 12) throw std::invalid_argument("duration");
  long long n = std::stoll(text.substr(0, i));
  std::string unit = text.substr(i);
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "s" || unit.empty()) return std::chrono::seconds(n);
  if (unit == "m") return std::chrono::minutes(n);
  if (unit == "h") return std::chrono::hours(n);
  throw std::invalid_argument("duration");
}

void apply_listen(Config& cfg, const std::string& value, const std::string& key, int line) {
  auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw ConfigError(key, line, "expected HOST:PORT, got '" + value + "'");
  std::string host = value.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::string port = value.substr(colon + 1);
  size_t used = 0;
  long p = -1;
  try {
    p = std::stol(port, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != port.size() || p < 1 || p > 65535)
    throw ConfigError(key, line, "port must be 1-65535, got '" + port + "'");
  cfg.listen_host = host;
  cfg.listen_port = static_cast<int>(p);
}

Config parse_config(const std::string& yaml_text) {
  Config cfg;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError("<document>", e.mark.line + 1, "YAML syntax error: " + e.msg);
  }
  if (root.IsNull()) return cfg;  // an empty file means "all defaults"

  walk("", root, {
      {"listen", [&](const std::string& k, const YAML::Node& v) {
         apply_listen(cfg, scalar(k, v), k, line_of(v));
       }},
      {"kernel_btf", [&](const std::string& k, const YAML::Node& v) { cfg.kernel_btf = scalar(k, v); }},
      {"poll_interval", [&](const std::string& k, const YAML::Node& v) { cfg.poll_interval = duration(k, v); }},
      {"discovery_interval", [&](const std::string& k, const YAML::Node& v) { cfg.discovery_interval = duration(k, v); }},
      {"grace_period", [&](const std::string& k, const YAML::Node& v) { cfg.grace_period = duration(k, v); }},
      {"probes", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"tcp", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.tcp = boolean(kk, vv); }},
             {"cuda", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.cuda = boolean(kk, vv); }},
             {"nccl", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.nccl = boolean(kk, vv); }},
             {"usdt", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.usdt = boolean(kk, vv); }},
             {"xid", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.xid = boolean(kk, vv); }},
         });
       }},
      {"libraries", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"discover", [&](const std::string& kk, const YAML::Node& vv) { cfg.libraries.discover = boolean(kk, vv); }},
             {"cuda", [&](const std::string& kk, const YAML::Node& vv) { cfg.libraries.cuda = paths(kk, vv); }},
             {"nccl", [&](const std::string& kk, const YAML::Node& vv) { cfg.libraries.nccl = paths(kk, vv); }},
             {"usdt", [&](const std::string& kk, const YAML::Node& vv) { cfg.libraries.usdt = paths(kk, vv); }},
         });
       }},
      {"windows", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"fragmentation", [&](const std::string& kk, const YAML::Node& vv) { cfg.fragmentation_window = duration(kk, vv); }},
         });
       }},
      {"correlation", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"collective_timeout", [&](const std::string& kk, const YAML::Node& vv) { cfg.collective_timeout = duration(kk, vv); }},
         });
       }},
      {"tcp", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"top_peers", [&](const std::string& kk, const YAML::Node& vv) { cfg.tcp_top_peers = integer(kk, vv, 0, 1000); }},
         });
       }},
  });
  return cfg;
}

Config load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("file", 0, "cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str());
}

}  // namespace vigil::agent
