// ChatTemplate: a model's `tokenizer.chat_template` (a Jinja template) parsed once and rendered
// per request, byte-identical to what Hugging Face transformers' apply_chat_template produces
// for the supported subset. Unsupported syntax fails at parse time with its line:column.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/gguf.h"
#include "runtime/chat/limits.h"
#include "runtime/chat/value.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime::chat {

struct ChatContext {
  Value messages = Value(Array{});  // [{"role": ..., "content": ..., "tool_calls": ...}, ...]
  Value tools = Value::none();      // tool schemas, or none (transformers passes None)
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  Object extra;                // extra template variables: enable_thinking, documents, ...
  std::optional<std::tm> now;  // the local time strftime_now() formats; unset: the current time
  // render_prompt: whether control-token texts inside messages, tools and extra variables may
  // become control tokens. Off by default: only the template's own text (and bos/eos) may.
  bool special_tokens_in_content = false;
};

// A rendered prompt ready for the tokenizer: encode `text` with parse_special and plain_ranges
// = `plain`, the places where the caller's strings held control-token texts.
struct RenderedPrompt {
  std::string text;
  std::vector<tokenizer::TextRange> plain;
};

class ChatTemplate {
 public:
  // Parses and checks the template (every statement, filter and test must be supported).
  // `limits` bound the parse (nesting depth) and every render of this template (limits.h);
  // the defaults suit any real template.
  static Result<ChatTemplate> parse(std::string_view source, const TemplateLimits& limits = {});

  // Renders with the variables transformers passes: messages, tools, documents (none),
  // add_generation_prompt, bos_token, eos_token, then `extra` (which may override them).
  // Thread-safe: rendering does not modify the template.
  Result<std::string> render(const ChatContext& context) const;
  // Renders for the model: like render(), but control-token texts of `tokenizer` inside the
  // caller's strings are reported as plain ranges (unless special_tokens_in_content), so that
  // a message cannot forge the template's structure (content_guard.h).
  Result<RenderedPrompt> render_prompt(const ChatContext& context, const tokenizer::Tokenizer& tokenizer) const;

  const std::string& source() const { return source_; }
  const TemplateLimits& limits() const { return limits_; }

 private:
  struct Parsed;
  std::string source_;
  std::shared_ptr<const Parsed> parsed_;
  TemplateLimits limits_;
};

// The template stored under tokenizer.chat_template, else cera's built-in one for the file's
// architecture (builtin_templates.h); kNotFound when there is neither.
Result<ChatTemplate> chat_template_from_gguf(const format::GgufFile& file);

// The texts of the vocabulary's BOS and EOS tokens ("" when it has none), as templates expect
// them in bos_token / eos_token.
struct SpecialTokenTexts {
  std::string bos;
  std::string eos;
};
SpecialTokenTexts special_token_texts(const tokenizer::Tokenizer& tokenizer);

// {"role": role, "content": content}
Value make_message(std::string_view role, std::string_view content);

}  // namespace cera::runtime::chat
