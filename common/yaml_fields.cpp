// The strict YAML field readers: each either returns a checked value or throws ConfigKeyError.
#include "common/yaml_fields.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace vigil::yaml_fields {

int line_of(const YAML::Node& node) { return node.Mark().line + 1; }

void fail(const std::string& key, const YAML::Node& node, const std::string& what) {
  throw ConfigKeyError(key, line_of(node), what);
}

YAML::Node load_document(const std::string& yaml_text) {
  try {
    return YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigKeyError("<document>", e.mark.line + 1, "YAML syntax error: " + e.msg);
  }
}

std::string read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigKeyError("file", 0, "cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string scalar(const std::string& key, const YAML::Node& node) {
  if (!node.IsScalar()) fail(key, node, "expected a scalar value");
  return node.Scalar();
}

long long integer(const std::string& key, const YAML::Node& node, long long lo, long long hi) {
  std::string v = scalar(key, node);
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || n < lo || n > hi)
    fail(key, node, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "], got '" + v + "'");
  return n;
}

int int_in(const std::string& key, const YAML::Node& node, int lo, int hi) {
  return static_cast<int>(integer(key, node, lo, hi));
}

double number(const std::string& key, const YAML::Node& node, double lo, double hi) {
  std::string v = scalar(key, node);
  size_t used = 0;
  double d = 0;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || !(d >= lo && d <= hi))
    fail(key, node, "expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "], got '" + v + "'");
  return d;
}

bool boolean(const std::string& key, const YAML::Node& node, BoolWords words) {
  std::string v = scalar(key, node);
  const bool words_too = words == BoolWords::kTrueFalseOnOffYesNo;
  if (v == "true" || (words_too && (v == "on" || v == "yes"))) return true;
  if (v == "false" || (words_too && (v == "off" || v == "no"))) return false;
  fail(key, node, "expected true or false, got '" + v + "'");
}

std::chrono::milliseconds parse_duration(const std::string& text, DurationUnits units) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 12) throw std::invalid_argument("duration");
  long long n = std::stoll(text.substr(0, i));
  std::string unit = text.substr(i);
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "s" || unit.empty()) return std::chrono::seconds(n);
  if (unit == "m") return std::chrono::minutes(n);
  if (unit == "h" && units == DurationUnits::kUpToHours) return std::chrono::hours(n);
  throw std::invalid_argument("duration");
}

std::chrono::milliseconds duration(const std::string& key, const YAML::Node& node, DurationUnits units) {
  std::string v = scalar(key, node);
  std::chrono::milliseconds d{0};
  try {
    d = parse_duration(v, units);
  } catch (const std::invalid_argument&) {
    fail(key, node, "expected a duration like 500ms, 5s, 2m, got '" + v + "'");
  }
  if (d.count() <= 0) fail(key, node, "must be positive, got '" + v + "'");
  return d;
}

void walk(const std::string& prefix, const YAML::Node& node, const std::map<std::string, Handler>& handlers) {
  if (!node.IsMap()) fail(prefix.empty() ? "<document>" : prefix, node, "expected a mapping");
  std::map<std::string, int> seen;  // key -> its line: a repeated key would silently override
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      fail(prefix.empty() ? "<document>" : prefix, kv.first, "keys must be plain strings");
    std::string name = kv.first.Scalar();
    std::string key = prefix.empty() ? name : prefix + "." + name;
    auto it = handlers.find(name);
    if (it == handlers.end()) fail(key, kv.first, "unknown key");
    if (auto [at, fresh] = seen.emplace(name, line_of(kv.first)); !fresh)
      fail(key, kv.first, "duplicate key (first at line " + std::to_string(at->second) + ")");
    it->second(key, kv.second);
  }
}

}  // namespace vigil::yaml_fields
