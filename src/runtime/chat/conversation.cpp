// Incremental prompts for multi-turn chat. The system part's size is found by rendering the
// system message alone and taking the common prefix with the full rendering, which works for
// templates that put the system text in its own turn and for those that fold it into the first.
#include "runtime/chat/conversation.h"

namespace cera::runtime::chat {

Conversation::Conversation(ChatTemplate chat_template, ChatContext base)
    : template_(std::move(chat_template)), base_(std::move(base)) {}

void Conversation::set_system(std::string text) {
  system_ = std::move(text);
  clear();
}

void Conversation::clear() {
  messages_.clear();
  evaluated_.clear();
  if (!system_.empty()) messages_.push_back(make_message("system", system_));
}

void Conversation::add_user(std::string text) {
  messages_.push_back(make_message("user", text));
}

void Conversation::add_assistant(std::string text) {
  evaluated_ += text;
  messages_.push_back(make_message("assistant", text));
}

Result<std::string> Conversation::render(const Array& messages, bool add_generation_prompt) const {
  ChatContext ctx = base_;
  ctx.messages = Value(messages);
  ctx.add_generation_prompt = add_generation_prompt;
  return template_.render(ctx);
}

Result<TurnPrompt> Conversation::next_prompt() {
  CERA_ASSIGN_OR_RETURN(std::string full, render(messages_, true));
  TurnPrompt turn;
  if (!evaluated_.empty() && full.compare(0, evaluated_.size(), evaluated_) == 0) {
    turn.text = full.substr(evaluated_.size());
    evaluated_ = std::move(full);
    return turn;
  }
  turn.restart = !evaluated_.empty();
  if (!system_.empty()) {
    CERA_ASSIGN_OR_RETURN(std::string sys, render(Array{messages_.front()}, false));
    size_t n = 0;
    while (n < sys.size() && n < full.size() && sys[n] == full[n]) ++n;
    turn.system_size = n;
  }
  turn.text = full;
  evaluated_ = std::move(full);
  return turn;
}

}  // namespace cera::runtime::chat
