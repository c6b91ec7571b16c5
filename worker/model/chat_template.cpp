// ChatML rendering of SmolLM2's chat template (tests/fixtures/chat_template.json is Jinja's output).
#include "model/chat_template.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string_view>

#include "model/vocab.h"

namespace vigil {
namespace {

constexpr std::string_view kDefaultSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
constexpr std::array<std::string_view, 4> kRoles = {"system", "user", "assistant", "tool"};

constexpr std::string_view kTurnStart = "<|im_start|>";
constexpr std::string_view kTurnEnd = "<|im_end|>";

// Walks the template: `control` gets the template's own control-token text, `text` everything
// else (roles, content, newlines), in order.
template <typename Control, typename Text>
void render(std::span<const ChatMessage> messages, bool add_generation_prompt, Control&& control, Text&& text) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end())
      throw std::invalid_argument("chat message " + std::to_string(i) + " has role '" + role +
                                  "'; expected system, user, assistant or tool");
  }
  auto turn = [&](std::string_view role, std::string_view content) {
    control(kTurnStart);
    text(role);
    text("\n");
    text(content);
    control(kTurnEnd);
    text("\n");
  };
  if (!messages.empty() && messages.front().role != "system") turn("system", kDefaultSystem);
  for (const ChatMessage& m : messages) turn(m.role, m.content);
  if (add_generation_prompt) {
    control(kTurnStart);
    text("assistant\n");
  }
}

int32_t control_id(const Vocab& vocab, std::string_view text) {
  const std::vector<int32_t> ids = vocab.encode(text, true);
  if (ids.size() != 1 || !vocab.is_control(ids[0]))
    throw std::invalid_argument("the model's vocabulary has no " + std::string(text) + " control token for ChatML");
  return ids[0];
}

}  // namespace

std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  auto append = [&](std::string_view s) { out += s; };
  render(messages, add_generation_prompt, append, append);
  return out;
}

std::vector<int32_t> encode_chat(const Vocab& vocab, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) {
  const int32_t start = control_id(vocab, kTurnStart), end = control_id(vocab, kTurnEnd);
  std::vector<int32_t> ids;
  std::string pending;  // text since the last control token, tokenized as one fragment like llama.cpp
  auto flush = [&] {
    const std::vector<int32_t> t = vocab.encode(pending, false);
    ids.insert(ids.end(), t.begin(), t.end());
    pending.clear();
  };
  render(
      messages, add_generation_prompt,
      [&](std::string_view c) {
        flush();
        ids.push_back(c == kTurnStart ? start : end);
      },
      [&](std::string_view t) { pending += t; });
  flush();
  return ids;
}

}  // namespace vigil
