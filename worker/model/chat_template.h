// The model's chat template (ChatML, as stored in SmolLM2's GGUF) rendered without a Jinja engine.
#pragma once

#include <span>
#include <string>

namespace vigil {

struct ChatMessage {
  std::string role;  // system, user, assistant or tool
  std::string content;
};

// Renders exactly what the GGUF's tokenizer.chat_template gives under Jinja: when the first
// message is not "system", SmolLM2's default system prompt comes first; with
// add_generation_prompt the text ends with "<|im_start|>assistant\n". Content is copied verbatim,
// special-token text included (encode with parse_special=false to keep a user from forging turns).
// Throws std::invalid_argument naming the message whose role is not one of the four.
std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt);

}  // namespace vigil
