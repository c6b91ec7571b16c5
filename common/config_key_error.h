// The one error every config parser throws: what is wrong, the dotted key and the line it is on.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace vigil {

// Line 0 when the value came from a flag or no file could be read.
class ConfigKeyError : public std::runtime_error {
 public:
  ConfigKeyError(std::string key, int line, const std::string& what)
      : std::runtime_error(what), key_(std::move(key)), line_(line) {}
  const std::string& key() const { return key_; }
  int line() const { return line_; }

 private:
  std::string key_;
  int line_;
};

}  // namespace vigil
