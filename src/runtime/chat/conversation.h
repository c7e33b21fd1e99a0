// Conversation: the messages of one chat and the text already sent to the model, so that each
// turn sends only what is new. Each turn renders the whole conversation with the template and
// checks that the text evaluated so far is a prefix of it; if the template rewrote history
// (e.g. it drops old reasoning), the caller must start over with full_text().
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chat/chat_template.h"

namespace cera::runtime::chat {

struct TurnPrompt {
  std::string text;  // what to evaluate now (parse special tokens in it, except in `plain`)
  std::vector<tokenizer::TextRange> plain;  // the caller's control-token texts in `text`
  bool restart =
      false;  // history no longer matches: clear the KV cache, evaluate `text` (everything)
  size_t system_size =
      0;  // when the whole rendering is sent: bytes of it that belong to the system part

  // The plain ranges inside text[begin, end), relative to `begin` (for sending text in parts).
  std::vector<tokenizer::TextRange> plain_within(size_t begin, size_t end) const;
};

class Conversation {
 public:
  // `base` supplies bos/eos texts, tools and extra variables; its messages are ignored. With the
  // model's tokenizer, control-token texts inside messages are reported as plain ranges
  // (ChatTemplate::render_prompt); without one, prompts are the bare renderings.
  Conversation(ChatTemplate chat_template, ChatContext base,
               std::optional<tokenizer::Tokenizer> tokenizer = std::nullopt);

  void set_system(std::string text);  // empty: no system message. Clears the conversation.
  void clear();                       // forgets the messages (keeps the system text)
  void add_user(std::string text);
  // Records the model's reply. `text` is exactly what was generated and evaluated (the
  // end-of-generation token is not part of it: the template writes the turn's end itself).
  void add_assistant(std::string text);

  // Renders the conversation with the generation prompt and returns what the model has not
  // seen yet. Marks it as seen.
  Result<TurnPrompt> next_prompt();

  const Array& messages() const { return messages_; }
  // Everything the model has seen (renderings plus replies).
  const std::string& evaluated() const { return evaluated_; }

 private:
  Result<RenderedPrompt> render(const Array& messages, bool add_generation_prompt) const;

  ChatTemplate template_;
  ChatContext base_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::string system_;
  Array messages_;
  std::string evaluated_;
  std::vector<tokenizer::TextRange> evaluated_plain_;  // plain ranges of evaluated_
};

}  // namespace cera::runtime::chat
