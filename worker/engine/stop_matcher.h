// Finds stop strings in streamed text, holding back only what could still begin one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vigil {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends generated text; returns the text now safe to emit. After a stop string is seen,
  // stopped() is true and the returned text ends right before it.
  std::string push(std::string_view text);
  // The held-back tail, at the end of generation (empty once stopped).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace vigil
