// Parses the agent's YAML config strictly: unknown keys and bad values name the key and its line.
#include "config/config.h"

#include "common/yaml_fields.h"

namespace vigil::agent {
namespace {

using yaml_fields::fail;
using yaml_fields::int_in;
using yaml_fields::scalar;
using yaml_fields::walk;

// The agent has always taken on/off and yes/no too, and durations in hours.
bool boolean(const std::string& key, const YAML::Node& node) {
  return yaml_fields::boolean(key, node, yaml_fields::BoolWords::kTrueFalseOnOffYesNo);
}

std::chrono::milliseconds duration(const std::string& key, const YAML::Node& node) {
  return yaml_fields::duration(key, node, yaml_fields::DurationUnits::kUpToHours);
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

std::vector<std::string> probe_names(const std::string& key, const YAML::Node& node) {
  if (!node.IsSequence()) fail(key, node, "expected a list of SET:PROBE names");
  std::vector<std::string> out;
  for (const auto& item : node) {
    std::string name = scalar(key, item);
    auto colon = name.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == name.size())
      fail(key, item, "expected SET:PROBE (e.g. tcp:tcp_sendmsg_locked), got '" + name + "'");
    out.push_back(name);
  }
  return out;
}

}  // namespace

std::set<std::string> ProbeSets::disabled_in(const std::string& set) const {
  std::set<std::string> out;
  for (const auto& name : disable)
    if (name.size() > set.size() && name.compare(0, set.size(), set) == 0 && name[set.size()] == ':')
      out.insert(name.substr(set.size() + 1));
  return out;
}

std::chrono::milliseconds stall_limit(const Config& cfg) {
  if (cfg.housekeeping_stall_limit.count() > 0) return cfg.housekeeping_stall_limit;
  // A tick may run late by a few intervals on a busy node (a full /proc scan); 30 s more keeps a
  // slow first scan from counting as a stall.
  return 3 * cfg.poll_interval + std::chrono::seconds(30);
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
  YAML::Node root = yaml_fields::load_document(yaml_text);
  if (root.IsNull()) return cfg;  // an empty file means "all defaults"

  walk("", root, {
      {"listen", [&](const std::string& k, const YAML::Node& v) {
         apply_listen(cfg, scalar(k, v), k, yaml_fields::line_of(v));
       }},
      {"kernel_btf", [&](const std::string& k, const YAML::Node& v) { cfg.kernel_btf = scalar(k, v); }},
      {"poll_interval", [&](const std::string& k, const YAML::Node& v) { cfg.poll_interval = duration(k, v); }},
      {"discovery_interval", [&](const std::string& k, const YAML::Node& v) { cfg.discovery_interval = duration(k, v); }},
      {"grace_period", [&](const std::string& k, const YAML::Node& v) { cfg.grace_period = duration(k, v); }},
      {"housekeeping_stall_limit", [&](const std::string& k, const YAML::Node& v) {
         cfg.housekeeping_stall_limit = duration(k, v);
       }},
      {"bpf_stats", [&](const std::string& k, const YAML::Node& v) { cfg.bpf_stats = boolean(k, v); }},
      {"probes", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"tcp", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.tcp = boolean(kk, vv); }},
             {"cuda", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.cuda = boolean(kk, vv); }},
             {"nccl", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.nccl = boolean(kk, vv); }},
             {"usdt", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.usdt = boolean(kk, vv); }},
             {"xid", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.xid = boolean(kk, vv); }},
             {"disable", [&](const std::string& kk, const YAML::Node& vv) { cfg.probes.disable = probe_names(kk, vv); }},
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
      {"kubernetes", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"container_logs", [&](const std::string& kk, const YAML::Node& vv) { cfg.container_logs = scalar(kk, vv); }},
         });
       }},
      {"xid", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"kernel_log", [&](const std::string& kk, const YAML::Node& vv) { cfg.kernel_log = scalar(kk, vv); }},
         });
       }},
      {"tcp", [&](const std::string& k, const YAML::Node& v) {
         walk(k, v, {
             {"top_peers", [&](const std::string& kk, const YAML::Node& vv) { cfg.tcp_top_peers = int_in(kk, vv, 0, 1000); }},
         });
       }},
  });
  return cfg;
}

Config load_config_file(const std::string& path) {
  return parse_config(yaml_fields::read_config_file(path));
}

}  // namespace vigil::agent
