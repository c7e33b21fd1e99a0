// Incremental prompts for multi-turn chat. The system part's size is found by rendering the
// system message alone and taking the common prefix with the full rendering, which works for
// templates that put the system text in its own turn and for those that fold it into the first.
#include "runtime/chat/conversation.h"

#include <algorithm>

namespace cera::runtime::chat {

namespace {

std::vector<tokenizer::TextRange> ranges_within(std::span<const tokenizer::TextRange> ranges, size_t begin,
                                                size_t end) {
  std::vector<tokenizer::TextRange> out;
  for (const tokenizer::TextRange& r : ranges) {
    const size_t lo = std::max<size_t>(r.offset, begin);
    const size_t hi = std::min<size_t>(size_t{r.offset} + r.length, end);
    if (lo < hi) out.push_back({static_cast<uint32_t>(lo - begin), static_cast<uint32_t>(hi - lo)});
  }
  return out;
}

}  // namespace

std::vector<tokenizer::TextRange> TurnPrompt::plain_within(size_t begin, size_t end) const {
  return ranges_within(plain, begin, end);
}

Conversation::Conversation(ChatTemplate chat_template, ChatContext base, std::optional<tokenizer::Tokenizer> tokenizer)
    : template_(std::move(chat_template)), base_(std::move(base)), tokenizer_(std::move(tokenizer)) {}

void Conversation::set_system(std::string text) {
  system_ = std::move(text);
  clear();
}

void Conversation::clear() {
  messages_.clear();
  evaluated_.clear();
  evaluated_plain_.clear();
  if (!system_.empty()) messages_.push_back(make_message("system", system_));
}

void Conversation::add_user(std::string text) {
  messages_.push_back(make_message("user", text));
}

void Conversation::add_assistant(std::string text) {
  evaluated_ += text;
  messages_.push_back(make_message("assistant", text));
}

Result<RenderedPrompt> Conversation::render(const Array& messages, bool add_generation_prompt) const {
  ChatContext ctx = base_;
  ctx.messages = Value(messages);
  ctx.add_generation_prompt = add_generation_prompt;
  if (tokenizer_) return template_.render_prompt(ctx, *tokenizer_);
  CERA_ASSIGN_OR_RETURN(std::string text, template_.render(ctx));
  return RenderedPrompt{.text = std::move(text), .plain = {}};
}

Result<TurnPrompt> Conversation::next_prompt() {
  CERA_ASSIGN_OR_RETURN(RenderedPrompt full, render(messages_, true));
  TurnPrompt turn;
  // The history must match byte for byte, and so must what may and may not be a control token.
  if (!evaluated_.empty() && full.text.compare(0, evaluated_.size(), evaluated_) == 0 &&
      ranges_within(full.plain, 0, evaluated_.size()) == evaluated_plain_) {
    turn.text = full.text.substr(evaluated_.size());
    turn.plain = ranges_within(full.plain, evaluated_.size(), full.text.size());
    evaluated_ = std::move(full.text);
    evaluated_plain_ = std::move(full.plain);
    return turn;
  }
  turn.restart = !evaluated_.empty();
  if (!system_.empty()) {
    CERA_ASSIGN_OR_RETURN(RenderedPrompt sys, render(Array{messages_.front()}, false));
    size_t n = 0;
    while (n < sys.text.size() && n < full.text.size() && sys.text[n] == full.text[n]) ++n;
    turn.system_size = n;
  }
  turn.text = full.text;
  turn.plain = full.plain;
  evaluated_ = std::move(full.text);
  evaluated_plain_ = std::move(full.plain);
  return turn;
}

}  // namespace cera::runtime::chat
