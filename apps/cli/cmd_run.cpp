// `cera run`: complete a prompt, streaming text to stdout and timings to stderr. The generation
// is one request through the engine loop (a LoopSession over a loop of one). Ctrl-C stops the
// generation: the text so far and the timings are still written, and the exit status is 130 (as
// for a process a shell saw killed by SIGINT). A failed write to stdout also stops it (status 1).
#include <fmt/format.h>

#include <csignal>
#include <cstdio>

#include "arg_checks.h"
#include "grammar_options.h"
#include "model_options.h"
#include "output.h"
#include "runtime/chat/chat_template.h"
#include "runtime/engine/loop_session.h"
#include "sampling_options.h"
#include "text_input.h"

namespace cera::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 128;  // -1: no limit
  SamplingOptions sampling;
  GrammarOptions grammar;
  int n_keep = 0;
  int64_t max_input_mib = kDefaultMaxInputMiB;
  bool ignore_eos = false;
  bool truncate_prompt = false;  // a prompt longer than the context loses its middle
  bool no_bos = false;
  bool special = false;
  std::vector<std::string> stop;
  bool chat = false;   // format the prompt as one user message with the model's chat template
  std::string system;  // with --chat: a system message before it
};

runtime::LoopSession* g_running = nullptr;  // for the SIGINT handler: cancel (a flag), don't die

void on_sigint(int) {
  if (g_running != nullptr) g_running->cancel();
}

void run(const RunOptions& o) {
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) {
    auto text = read_text_input("run", o.prompt_file, o.max_input_mib);
    if (!text.ok()) fail("run", text.status());
    prompt = std::move(text).value();
  }
  const runtime::SamplingParams sampling = resolve_sampling("run", o.sampling);
  auto engine = load_engine_or_exit("run", o.model);
  const auto grammar = load_grammar_or_exit("run", o.grammar, engine->tokenizer(), o.max_input_mib);
  auto loop = new_loop_or_exit("run", *engine, o.model);
  auto session = std::make_unique<runtime::LoopSession>(
      *loop, engine->tokenizer(),
      runtime::LoopSessionOptions{.n_keep = o.n_keep, .context_shift = true, .truncate_long_prompt = o.truncate_prompt});
  // The session keeps at most half the context on a shift: more is not what was asked for.
  if (o.n_keep > session->n_ctx() / 2) {
    fail("run", invalid_argument(fmt::format("--n-keep {}: must be from -1 to {} (half the context of {} tokens; "
                                             "-1: the whole prompt): lower it or raise -c",
                                             o.n_keep, session->n_ctx() / 2, session->n_ctx())));
  }
  const bool add_bos = !o.no_bos;  // BOS (and EOS) as the vocabulary's add_*_token flags say
  Status st;
  if (prompt.empty()) {
    // An empty prompt starts from BOS alone (the model's "unconditional" start).
    const int32_t bos = engine->tokenizer().bos();
    if (bos < 0) fail("run", invalid_argument("empty prompt and the vocabulary has no BOS token"));
    st = session->append_tokens(std::span(&bos, 1));
  } else if (o.chat) {
    // One-shot chat: the template decides BOS and special tokens, as transformers does.
    auto tmpl = runtime::chat::chat_template_from_gguf(engine->file());
    if (!tmpl.ok()) fail("run", tmpl.status());
    const auto texts = runtime::chat::special_token_texts(engine->tokenizer());
    runtime::chat::ChatContext ctx{.add_generation_prompt = true, .bos_token = texts.bos, .eos_token = texts.eos};
    runtime::chat::Array messages;
    if (!o.system.empty()) messages.push_back(runtime::chat::make_message("system", o.system));
    messages.push_back(runtime::chat::make_message("user", prompt));
    ctx.messages = runtime::chat::Value(std::move(messages));
    ctx.special_tokens_in_content = o.special;  // else the prompt's "<|im_end|>" stays text
    auto rendered = tmpl->render_prompt(ctx, engine->tokenizer());
    if (!rendered.ok()) fail("run", rendered.status());
    st = session->append_text(rendered->text, {.parse_special = true, .plain_ranges = rendered->plain});
  } else {
    st = session->append_text(prompt, {.add_special = add_bos, .parse_special = o.special});
  }
  if (st.code() == ErrorCode::kOutOfRange) {
    fail("run", out_of_range(st.message() + " (-c N sets the context" +
                             (o.truncate_prompt ? std::string(")") : ", --truncate-prompt drops the prompt's middle)")));
  }
  if (!st.ok()) fail("run", st);
  if (const int64_t dropped = session->stats().n_prompt_tokens_dropped; dropped > 0) {
    fmt::print(stderr, "prompt truncated: {} tokens from its middle dropped, {} kept (--truncate-prompt)\n", dropped,
               session->stats().n_prompt_tokens);
  }
  g_running = session.get();
  std::signal(SIGINT, on_sigint);
  runtime::LoopSession* running = session.get();
  auto result = session->generate({.max_tokens = o.n_predict < 0 ? kInt32Max : o.n_predict,
                                   .sampling = sampling,
                                   .stop = o.stop,
                                   .stop_at_end_of_generation = !o.ignore_eos,
                                   .grammar = grammar},
                                  [running](std::string_view piece) {
                                    if (!stdout_write(piece, /*flush=*/true)) running->cancel();
                                  });
  g_running = nullptr;
  std::signal(SIGINT, SIG_DFL);
  fail_if_stdout_failed();  // its message is printed; the timings would describe a lost text
  if (!result.ok()) fail("run", result.status());
  stdout_write("\n", /*flush=*/true);
  fail_if_stdout_failed();
  const runtime::SessionStats& s = session->stats();
  fmt::print(stderr, "\n{}\nload:       {:8.1f} ms\nprompt:     {:8.1f} ms for {:5d} tokens ({:8.2f} tokens/s)\n"
             "generation: {:8.1f} ms for {:5d} tokens ({:8.2f} tokens/s), stopped by {}\n",
             engine->device_name(), engine->load_seconds() * 1e3, s.prompt_seconds * 1e3, s.n_prompt_tokens,
             s.n_prompt_tokens / std::max(s.prompt_seconds, 1e-9), s.generation_seconds * 1e3, s.n_generated_tokens,
             s.n_generated_tokens / std::max(s.generation_seconds, 1e-9), runtime::stop_reason_name(result->reason));
  const runtime::KvBytes kv = loop->kv_bytes();
  fmt::print(stderr, "KV cache:   {:8.1f} MiB for {} tokens (full-length layers {:.1f} MiB, sliding-window rings {:.1f} MiB)\n",
             kv.total() / 1048576.0, session->n_ctx(), kv.full / 1048576.0, kv.ring / 1048576.0);
  if (s.n_context_shifts > 0) fmt::print(stderr, "context shifts: {}\n", s.n_context_shifts);
  if (result->reason == runtime::StopReason::kCancelled) throw CLI::RuntimeError(130);  // Ctrl-C
}

}  // namespace

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Complete a prompt and stream the text");
  auto o = std::make_shared<RunOptions>();
  add_model_options(cmd, o->model);
  auto* prompt = cmd->add_option("-p,--prompt", o->prompt, "prompt text (empty: start from BOS)");
  auto* file = cmd->add_option("-f,--file", o->prompt_file,
                               "read the prompt from a file (a pipe or FIFO too: -f <(cmd), -f /dev/stdin)");
  prompt->excludes(file);
  file->excludes(prompt);
  add_max_input_option(cmd, o->max_input_mib);
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate (-1: until an end-of-generation token)")
      ->check(int_range(-1, kInt32Max, "-1: no limit"));
  add_sampling_options(cmd, o->sampling);
  add_grammar_options(cmd, o->grammar);
  cmd->add_option("--n-keep", o->n_keep, "tokens kept at the start on a context shift (-1: the prompt)")
      ->check(int_range(-1, kInt32Max, "-1: the whole prompt; at most half the context"));
  cmd->add_option("--stop", o->stop, "stop before this string (repeatable)");
  cmd->add_flag("--no-bos", o->no_bos, "do not add BOS even if the vocabulary asks for it");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "generate all -n tokens, past end-of-generation tokens");
  cmd->add_flag("--truncate-prompt", o->truncate_prompt,
                "a prompt longer than the context keeps its first --n-keep tokens (at least BOS) and its last "
                "(ctx - those) / 2 tokens instead of failing");
  cmd->add_flag("--special", o->special,
                "parse special-token texts in the prompt (with --chat: inside the messages too; without it "
                "they stay text there)");
  cmd->add_flag("--chat", o->chat, "format the prompt as a user message with the model's chat template");
  cmd->add_option("--system", o->system, "with --chat: system prompt")->needs(cmd->get_option("--chat"));
  cmd->callback([o] { run(*o); });
}

}  // namespace cera::cli
