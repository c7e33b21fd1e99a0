// `cera chat`: an interactive conversation rendered with the model's own chat template. Each
// reply is one request through the engine loop (a LoopSession); the KV of earlier turns comes
// from the prefix cache, so a turn evaluates only the text the template appended since the last
// turn and at most one KV block more (the per-reply stderr line shows how many tokens that was). Ctrl-C stops a reply;
// a second Ctrl-C at the prompt leaves. Works on a pipe too: one message per input line, each at
// most --max-input-mb MiB. A failed write to stdout stops the reply and the chat (status 1).
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>

#include "arg_checks.h"
#include "model_options.h"
#include "output.h"
#include "runtime/chat/conversation.h"
#include "runtime/engine/loop_session.h"
#include "grammar_options.h"
#include "sampling_options.h"
#include "text_input.h"

namespace cera::cli {
namespace {

struct ChatOptions {
  ModelOptions model;
  std::string system;
  std::string first_message;  // sent before any input is read (-p)
  bool special = false;       // control-token texts typed in messages become control tokens
  int n_predict = 1024;  // -1: no limit
  SamplingOptions sampling;
  GrammarOptions grammar;  // every reply follows it
  int64_t max_input_mib = kDefaultMaxInputMiB;
};

std::atomic<runtime::LoopSession*> g_generating{nullptr};
// Ctrl-C at the prompt writes to this pipe (self-pipe trick): a flag alone could be set just
// before read() blocks and then wait for the next key press.
int g_wake[2] = {-1, -1};

void on_sigint(int) {
  if (runtime::LoopSession* s = g_generating.load()) {
    s->cancel();
  } else {
    const char c = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_wake[1], &c, 1);
  }
}

enum class ReadResult { kLine, kEof, kInterrupted, kTooLong };

// One line from stdin, waiting on stdin and the Ctrl-C pipe together; kTooLong once the line
// passes max_bytes (stdin may be /dev/zero: nothing bounds a line but this).
ReadResult read_line(std::string& line, uint64_t max_bytes) {
  line.clear();
  char c = 0;
  while (true) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return ReadResult::kEof;
    }
    if (fds[1].revents & POLLIN) {
      while (::read(g_wake[0], &c, 1) == 1) {
      }
      return ReadResult::kInterrupted;
    }
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) {
      if (c == '\n') return ReadResult::kLine;
      if (line.size() >= max_bytes) return ReadResult::kTooLong;
      line += c;
    } else if (n == 0) {
      return line.empty() ? ReadResult::kEof : ReadResult::kLine;
    } else if (errno != EINTR) {
      return ReadResult::kEof;
    }
  }
}

// A message: one line; a line ending in '\' continues on the next; """ opens and closes a block.
ReadResult read_message(bool interactive, uint64_t max_bytes, std::string& message) {
  message.clear();
  std::string line;
  bool block = false;
  bool first = true;
  while (true) {
    if (interactive && !stdout_write(first ? "> " : ". ", /*flush=*/true)) return ReadResult::kEof;
    const ReadResult r = read_line(line, max_bytes - std::min<uint64_t>(message.size(), max_bytes));
    if (r != ReadResult::kLine)
      return (r == ReadResult::kEof && !message.empty()) ? ReadResult::kLine : r;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first && line == "\"\"\"") {
      block = true;
      first = false;
      continue;
    }
    first = false;
    if (block) {
      if (line == "\"\"\"") return ReadResult::kLine;
      if (!message.empty()) message += '\n';
      message += line;
      continue;
    }
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      message += line + '\n';
      continue;
    }
    message += line;
    return ReadResult::kLine;
  }
}

class ChatLoop {
 public:
  ChatLoop(const ChatOptions& o, api::Engine& engine, runtime::chat::ChatTemplate tmpl)
      : options_(o), engine_(engine), conversation_(std::move(tmpl), base_context(engine, o.special), engine.tokenizer()) {
    sampling_ = resolve_sampling("chat", o.sampling);  // once: a --seed -1 is drawn for the whole chat
    grammar_ = load_grammar_or_exit("chat", o.grammar, engine.tokenizer(), o.max_input_mib);
    // n_keep = -1: the first append of a conversation is the system part, kept on context shifts.
    loop_ = new_loop_or_exit("chat", engine, o.model);
    session_ = std::make_unique<runtime::LoopSession>(*loop_, engine.tokenizer(),
                                                      runtime::LoopSessionOptions{.n_keep = -1, .context_shift = true});
    conversation_.set_system(o.system);
  }

  void run() {
    const bool interactive = ::isatty(STDIN_FILENO) != 0;
    if (interactive) {
      fmt::print(stderr, "cera chat: {} on {}, context {} tokens (KV cache {:.1f} MiB). /help for commands.\n",
                 options_.model.model, engine_.device_name(), session_->n_ctx(),
                 loop_->kv_bytes().total() / 1048576.0);
    }
    if (!options_.first_message.empty()) {
      if (interactive) stdout_print("> {}\n", options_.first_message);
      turn(options_.first_message);
    }
    std::string message;
    bool interrupted_once = false;
    const uint64_t max_bytes = static_cast<uint64_t>(options_.max_input_mib) << 20;
    while (stdout_ok()) {
      const ReadResult r = read_message(interactive, max_bytes, message);
      if (r == ReadResult::kEof) break;
      if (r == ReadResult::kTooLong) fail("chat", input_too_long("a message on stdin", options_.max_input_mib));
      if (r == ReadResult::kInterrupted) {
        if (interrupted_once) break;
        interrupted_once = true;
        stdout_write("\n(Ctrl-C again or /quit to leave)\n", /*flush=*/true);
        continue;
      }
      interrupted_once = false;
      if (message.empty()) continue;
      if (message[0] == '/') {
        if (!command(message)) break;
        continue;
      }
      turn(message);
    }
    if (interactive) stdout_write("\n", /*flush=*/true);
    fail_if_stdout_failed();
  }

 private:
  static runtime::chat::ChatContext base_context(const api::Engine& engine, bool special) {
    const auto texts = runtime::chat::special_token_texts(engine.tokenizer());
    runtime::chat::ChatContext ctx;
    ctx.special_tokens_in_content = special;
    ctx.bos_token = texts.bos;
    ctx.eos_token = texts.eos;
    return ctx;
  }

  void restart() {
    session_->reset();
    conversation_.clear();
    n_turns_ = 0;
  }

  // Returns false to leave.
  bool command(const std::string& line) {
    const size_t space = line.find(' ');
    const std::string name = line.substr(0, space);
    const std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
    if (name == "/quit" || name == "/exit") return false;
    if (name == "/reset") {
      restart();
      fmt::print(stderr, "[conversation cleared]\n");
    } else if (name == "/system") {
      conversation_.set_system(arg);
      restart();
      fmt::print(stderr, "[system prompt {}; conversation cleared]\n",
                 arg.empty() ? "removed" : "set");
    } else if (name == "/stats") {
      const runtime::SessionStats& s = session_->stats();
      fmt::print(stderr,
                 "[stats: {} turns; prompt {} tokens in {:.1f} ms ({:.2f} tokens/s); generated {} "
                 "tokens in {:.1f} ms "
                 "({:.2f} tokens/s); context {}/{}; context shifts {}; KV cache {:.1f} MiB "
                 "(full-length {:.1f}, sliding-window rings {:.1f})]\n",
                 n_turns_, s.n_prompt_tokens, s.prompt_seconds * 1e3,
                 s.n_prompt_tokens / std::max(s.prompt_seconds, 1e-9), s.n_generated_tokens,
                 s.generation_seconds * 1e3,
                 s.n_generated_tokens / std::max(s.generation_seconds, 1e-9),
                 session_->tokens().size(), session_->n_ctx(), s.n_context_shifts,
                 loop_->kv_bytes().total() / 1048576.0, loop_->kv_bytes().full / 1048576.0,
                 loop_->kv_bytes().ring / 1048576.0);
    } else if (name == "/help") {
      fmt::print(stderr,
                 "/reset  forget the conversation\n/system TEXT  set the system prompt (clears the "
                 "conversation)\n"
                 "/stats  token counts and rates\n/quit  leave\nEnd a line with \\ to continue it; "
                 "\"\"\" opens "
                 "and closes a multi-line block. Ctrl-C stops a reply.\n");
    } else {
      fmt::print(stderr, "[unknown command {}; /help lists them]\n", name);
    }
    return true;
  }

  void turn(const std::string& message) {
    conversation_.add_user(message);
    auto prompt = conversation_.next_prompt();
    if (!prompt.ok()) {
      fmt::print(stderr, "cera chat: {}\n", prompt.status().to_string());
      restart();
      return;
    }
    if (prompt->restart) {
      fmt::print(stderr, "[the template changed earlier turns; re-evaluating the conversation]\n");
      session_->reset();
    }
    const runtime::SessionStats before = session_->stats();
    Status st;
    const std::string& text = prompt->text;
    // Control tokens come only from the template's text: message text in prompt->plain stays text.
    auto append = [&](size_t begin, size_t end) {
      const std::vector<tokenizer::TextRange> plain = prompt->plain_within(begin, end);
      return session_->append_text(std::string_view(text).substr(begin, end - begin),
                                   {.parse_special = true, .plain_ranges = plain});
    };
    if (prompt->system_size > 0) {  // the system part alone first: it becomes n_keep
      st = append(0, prompt->system_size);
      if (st.ok()) st = append(prompt->system_size, text.size());
    } else {
      st = append(0, text.size());
    }
    if (!st.ok()) {
      fmt::print(stderr, "cera chat: {}; conversation cleared\n", st.to_string());
      restart();
      return;
    }
    const auto n_history = static_cast<int64_t>(session_->tokens().size());  // the request's prompt
    g_generating.store(session_.get());
    runtime::LoopSession* generating = session_.get();
    auto result = session_->generate(
        {.max_tokens = options_.n_predict < 0 ? kInt32Max : options_.n_predict, .sampling = sampling_, .grammar = grammar_},
        [generating](std::string_view piece) {
          if (!stdout_write(piece, /*flush=*/true)) generating->cancel();
        });
    g_generating.store(nullptr);
    stdout_write("\n", /*flush=*/true);
    fail_if_stdout_failed();  // the reply is lost: the chat cannot go on
    if (!result.ok()) {
      fmt::print(stderr, "cera chat: {}; conversation cleared\n", result.status().to_string());
      restart();
      return;
    }
    // The reply joins the history exactly as generated, so the next rendering extends it.
    conversation_.add_assistant(result->text);
    ++n_turns_;
    const double gen_s = session_->stats().generation_seconds - before.generation_seconds;
    // Computed prompt tokens; the rest of the history came from the prefix cache.
    const int64_t n_prompt = session_->stats().n_prompt_tokens - before.n_prompt_tokens;
    const double prompt_s = session_->stats().prompt_seconds - before.prompt_seconds;
    const int64_t reused = n_history - n_prompt;
    fmt::print(stderr,
               "[turn {}: prompt {} new tokens ({} reused) {:.1f} tokens/s; reply {} tokens {:.1f} "
               "tokens/s; "
               "context {}/{}; stopped by {}]\n",
               n_turns_, n_prompt, reused, n_prompt / std::max(prompt_s, 1e-9), result->n_generated,
               result->n_generated / std::max(gen_s, 1e-9), session_->tokens().size(),
               session_->n_ctx(), runtime::stop_reason_name(result->reason));
  }

  const ChatOptions& options_;
  api::Engine& engine_;
  runtime::chat::Conversation conversation_;
  runtime::SamplingParams sampling_;  // the seed decided once (--seed -1) for the whole chat
  std::shared_ptr<const runtime::grammar::TokenTables> grammar_;  // null: free replies
  std::unique_ptr<runtime::EngineLoop> loop_;
  std::unique_ptr<runtime::LoopSession> session_;
  int n_turns_ = 0;
};

void run_chat(const ChatOptions& o) {
  auto engine = load_engine_or_exit("chat", o.model);
  auto tmpl = runtime::chat::chat_template_from_gguf(engine->file());
  if (!tmpl.ok()) fail("chat", tmpl.status());
  ChatLoop loop(o, *engine, std::move(tmpl).value());
  if (::pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0) fail("chat", io_error("cannot create a pipe"));
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  struct sigaction old {};
  sigaction(SIGINT, &sa, &old);
  loop.run();
  sigaction(SIGINT, &old, nullptr);
  ::close(g_wake[0]);
  ::close(g_wake[1]);
}

}  // namespace

void register_chat(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "chat", "Chat with a model using its chat template (interactive or piped)");
  auto o = std::make_shared<ChatOptions>();
  add_model_options(cmd, o->model);
  cmd->add_option("--system", o->system, "system prompt");
  cmd->add_flag("--special", o->special,
                "let control-token texts typed in messages (\"<|im_end|>\") become control tokens; without "
                "it they stay text");
  cmd->add_option("-p,--prompt", o->first_message, "a first message, sent before reading input");
  cmd->add_option("-n,--n-predict", o->n_predict, "most tokens per reply (-1: until an end-of-generation token)")
      ->check(CLI::Validator(
          [](std::string& text) { return text == "-1" ? std::string() : int_range(1, kInt32Max, "-1: no limit")(text); },
          "-1 | INT in [1, 2147483647]"));
  add_sampling_options(cmd, o->sampling);
  add_grammar_options(cmd, o->grammar);
  add_max_input_option(cmd, o->max_input_mib);
  cmd->callback([o] { run_chat(*o); });
}

}  // namespace cera::cli
