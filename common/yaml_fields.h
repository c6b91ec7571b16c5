// Strict YAML config fields: typed scalars and mappings whose unknown keys are errors. Every
// error is a ConfigKeyError naming the dotted key and its line.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "common/config_key_error.h"

namespace vigil::yaml_fields {

// The worker takes YAML 1.2's true/false only; the agent has always also taken on/off, yes/no.
enum class BoolWords { kTrueFalse, kTrueFalseOnOffYesNo };
// The worker's durations stop at minutes ("2h" is an error there); the agent's go up to hours.
enum class DurationUnits { kUpToMinutes, kUpToHours };

int line_of(const YAML::Node& node);
[[noreturn]] void fail(const std::string& key, const YAML::Node& node, const std::string& what);

// The parsed document; a syntax error is key "<document>" with the error's line.
YAML::Node load_document(const std::string& yaml_text);
// The whole file; key "file", line 0 when it cannot be read.
std::string read_config_file(const std::string& path);

std::string scalar(const std::string& key, const YAML::Node& node);
long long integer(const std::string& key, const YAML::Node& node, long long lo, long long hi);
int int_in(const std::string& key, const YAML::Node& node, int lo, int hi);
double number(const std::string& key, const YAML::Node& node, double lo, double hi);
bool boolean(const std::string& key, const YAML::Node& node, BoolWords words = BoolWords::kTrueFalse);
// A positive duration.
std::chrono::milliseconds duration(const std::string& key, const YAML::Node& node,
                                   DurationUnits units = DurationUnits::kUpToMinutes);

// "250ms", "5s", "2m" (and "1h" with kUpToHours) or a bare number of seconds; at most 12 digits,
// so no unit overflows. Throws std::invalid_argument.
std::chrono::milliseconds parse_duration(const std::string& text, DurationUnits units);

using Handler = std::function<void(const std::string& key, const YAML::Node& value)>;

// Dispatches each key of a mapping to its handler with the dotted key ("server.port"); any other
// key is an error. An empty prefix is the document's top level.
void walk(const std::string& prefix, const YAML::Node& node, const std::map<std::string, Handler>& handlers);

}  // namespace vigil::yaml_fields
