// ChatTemplate = lexer + parser + a check that every filter/test name is one the evaluator has,
// so a template that would fail in some branch fails at load time, naming the construct.
#include "runtime/chat/chat_template.h"

#include "runtime/chat/builtin_templates.h"

#include "runtime/chat/builtins.h"
#include "runtime/chat/content_guard.h"
#include "runtime/chat/evaluator.h"
#include "runtime/chat/lexer.h"
#include "runtime/chat/parser.h"

namespace cera::runtime::chat {

struct ChatTemplate::Parsed {
  Body body;
};

namespace {

Status check_expr(const Expr& e) {
  if (e.kind == ExprKind::kFilter && !is_filter_name(e.name))
    return unsupported("chat template " + to_string(e.pos) + ": unsupported filter '" + e.name +
                       "'");
  if (e.kind == ExprKind::kTest && !is_test_name(e.name))
    return unsupported("chat template " + to_string(e.pos) + ": unsupported test '" + e.name + "'");
  for (const ExprPtr& c : e.children)
    if (c) CERA_RETURN_IF_ERROR(check_expr(*c));
  for (const Arg& a : e.args) CERA_RETURN_IF_ERROR(check_expr(*a.value));
  return ok_status();
}

Status check_body(const Body& body) {
  for (const StmtPtr& s : body) {
    for (const Expr* e : {s->expr.get(), s->filter.get()})
      if (e != nullptr) CERA_RETURN_IF_ERROR(check_expr(*e));
    for (const Branch& b : s->branches) {
      CERA_RETURN_IF_ERROR(check_expr(*b.condition));
      CERA_RETURN_IF_ERROR(check_body(b.body));
    }
    for (const MacroParam& p : s->params)
      if (p.default_value) CERA_RETURN_IF_ERROR(check_expr(*p.default_value));
    CERA_RETURN_IF_ERROR(check_body(s->body));
    CERA_RETURN_IF_ERROR(check_body(s->else_body));
  }
  return ok_status();
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, const TemplateLimits& limits) {
  if (source.size() > limits.max_source_bytes)
    return limit_error({}, "a template of " + std::to_string(source.size()) + " bytes: larger",
                       limits.max_source_bytes, "bytes", "max_source_bytes");
  CERA_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  auto parsed = std::make_shared<Parsed>();
  CERA_ASSIGN_OR_RETURN(parsed->body, parse_template(tokens, limits));
  CERA_RETURN_IF_ERROR(check_body(parsed->body));
  ChatTemplate t;
  t.source_ = std::string(source);
  t.parsed_ = std::move(parsed);
  t.limits_ = limits;
  return t;
}

Result<std::string> ChatTemplate::render(const ChatContext& context) const {
  std::tm now{};
  if (context.now) {
    now = *context.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  Object globals = make_globals(now, limits_);
  globals.set("messages", context.messages);
  globals.set("tools", context.tools);
  globals.set("documents", Value::none());
  globals.set("add_generation_prompt", Value(context.add_generation_prompt));
  globals.set("bos_token", Value(context.bos_token));
  globals.set("eos_token", Value(context.eos_token));
  for (const auto& [k, v] : context.extra.entries) globals.set(k, v);
  Evaluator evaluator(std::move(globals), limits_);
  std::string out;
  CERA_RETURN_IF_ERROR(evaluator.render(parsed_->body, out));
  return out;
}

Result<RenderedPrompt> ChatTemplate::render_prompt(const ChatContext& context,
                                                   const tokenizer::Tokenizer& tokenizer) const {
  if (context.special_tokens_in_content) {
    CERA_ASSIGN_OR_RETURN(std::string text, render(context));
    return RenderedPrompt{.text = std::move(text), .plain = {}};
  }
  const std::vector<std::string_view> controls = tokenizer.control_texts();
  const std::string_view trusted[] = {source_, context.bos_token, context.eos_token};
  const Value extra(context.extra);
  const Value* untrusted[] = {&context.messages, &context.tools, &extra};
  const ContentGuard guard(controls, trusted, untrusted);
  ChatContext protected_context = context;
  protected_context.messages = guard.protect(context.messages);
  protected_context.tools = guard.protect(context.tools);
  protected_context.extra = guard.protect(extra).as_object();
  CERA_ASSIGN_OR_RETURN(std::string text, render(protected_context));
  ContentGuard::Restored r = guard.restore(text);
  return RenderedPrompt{.text = std::move(r.text), .plain = std::move(r.plain)};
}

Result<ChatTemplate> chat_template_from_gguf(const format::GgufFile& file) {
  const format::GgufValue* v = file.find("tokenizer.chat_template");
  if (v == nullptr) {
    const std::string arch = file.get_or<std::string>("general.architecture", "").value_or("");
    if (auto builtin = builtin_template_for_arch(arch)) {
      auto t = ChatTemplate::parse(*builtin);
      if (!t.ok()) return t.status().with_context("built-in " + arch + " chat template");
      return t;
    }
    return not_found("the model file has no tokenizer.chat_template and cera has no built-in template for "
                     "architecture '" + arch + "'");
  }
  const std::string* s = v->string();
  if (s == nullptr) return corrupt("tokenizer.chat_template is not a string");
  auto t = ChatTemplate::parse(*s);
  if (!t.ok()) return t.status().with_context("tokenizer.chat_template");
  return t;
}

SpecialTokenTexts special_token_texts(const tokenizer::Tokenizer& tokenizer) {
  SpecialTokenTexts t;
  if (tokenizer.bos() >= 0) t.bos = std::string(tokenizer.token_text(tokenizer.bos()));
  if (tokenizer.eos() >= 0) t.eos = std::string(tokenizer.token_text(tokenizer.eos()));
  return t;
}

Value make_message(std::string_view role, std::string_view content) {
  Object m;
  m.set("role", Value(std::string(role)));
  m.set("content", Value(std::string(content)));
  return Value(std::move(m));
}

}  // namespace cera::runtime::chat
