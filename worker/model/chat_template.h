// The model's chat template (ChatML, as stored in SmolLM2's GGUF) rendered without a Jinja engine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vigil {

class Vocab;

struct ChatMessage {
  std::string role;  // system, user, assistant or tool
  std::string content;
};

// Renders exactly what the GGUF's tokenizer.chat_template gives under Jinja: when the first
// message is not "system", SmolLM2's default system prompt comes first; with
// add_generation_prompt the text ends with "<|im_start|>assistant\n". Content is copied verbatim,
// special-token text included. Throws std::invalid_argument naming the message whose role is not
// one of the four.
std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt);

// The same conversation as token ids, for the model. Only the template's own <|im_start|> and
// <|im_end|> become control tokens; roles and content are plain text, so a message cannot open or
// close turns by containing their text. For content without special-token text the ids equal
// vocab.encode(apply_chat_template(...), true), i.e. llama.cpp's. Throws std::invalid_argument as
// above, or when the vocabulary lacks the ChatML control tokens.
std::vector<int32_t> encode_chat(const Vocab& vocab, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt);

}  // namespace vigil
