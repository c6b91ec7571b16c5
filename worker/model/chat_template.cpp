// ChatML rendering of SmolLM2's chat template (tests/fixtures/chat_template.json is Jinja's output).
#include "model/chat_template.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string_view>

namespace vigil {
namespace {

constexpr std::string_view kDefaultSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
constexpr std::array<std::string_view, 4> kRoles = {"system", "user", "assistant", "tool"};

void append_turn(std::string& out, std::string_view role, std::string_view content) {
  out += "<|im_start|>";
  out += role;
  out += '\n';
  out += content;
  out += "<|im_end|>\n";
}

}  // namespace

std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end())
      throw std::invalid_argument("chat message " + std::to_string(i) + " has role '" + role +
                                  "'; expected system, user, assistant or tool");
  }
  std::string out;
  if (!messages.empty() && messages.front().role != "system") append_turn(out, "system", kDefaultSystem);
  for (const ChatMessage& m : messages) append_turn(out, m.role, m.content);
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace vigil
