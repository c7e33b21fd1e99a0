// `cera run`: complete a prompt, streaming text to stdout and timings to stderr.
#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "model_options.h"
#include "runtime/chat/chat_template.h"

namespace cera::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 128;
  runtime::SamplingParams sampling;
  int n_keep = 0;
  bool ignore_eos = false;
  bool no_bos = false;
  bool special = false;
  std::vector<std::string> stop;
  bool chat = false;   // format the prompt as one user message with the model's chat template
  std::string system;  // with --chat: a system message before it
};

runtime::Session* g_running = nullptr;  // for the SIGINT handler: cancel, don't die

void on_sigint(int) {
  if (g_running != nullptr) g_running->cancel();
}

void run(const RunOptions& o) {
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) fail("run", io_error("cannot read '" + o.prompt_file + "'"));
    std::stringstream ss;
    ss << in.rdbuf();
    prompt = ss.str();
  }
  auto engine = load_engine_or_exit("run", o.model);
  auto session = new_session_or_exit(
      "run", *engine, {.n_ctx = o.model.ctx, .n_batch = o.model.batch, .n_keep = o.n_keep, .context_shift = true});
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
    auto text = tmpl->render(ctx);
    if (!text.ok()) fail("run", text.status());
    st = session->append_text(*text, false, true);
  } else {
    st = session->append_text(prompt, add_bos, o.special);
  }
  if (!st.ok()) fail("run", st);
  g_running = session.get();
  std::signal(SIGINT, on_sigint);
  auto result = session->generate({.max_tokens = o.n_predict,
                                   .sampling = o.sampling,
                                   .stop = o.stop,
                                   .stop_at_end_of_generation = !o.ignore_eos},
                                  [](std::string_view piece) {
                                    std::fwrite(piece.data(), 1, piece.size(), stdout);
                                    std::fflush(stdout);
                                  });
  g_running = nullptr;
  std::signal(SIGINT, SIG_DFL);
  if (!result.ok()) fail("run", result.status());
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const runtime::SessionStats& s = session->stats();
  fmt::print(stderr, "\n{}\nload:       {:8.1f} ms\nprompt:     {:8.1f} ms for {:5d} tokens ({:8.2f} tokens/s)\n"
             "generation: {:8.1f} ms for {:5d} tokens ({:8.2f} tokens/s), stopped by {}\n",
             engine->backend().name(), engine->load_seconds() * 1e3, s.prompt_seconds * 1e3, s.n_prompt_tokens,
             s.n_prompt_tokens / std::max(s.prompt_seconds, 1e-9), s.generation_seconds * 1e3, s.n_generated_tokens,
             s.n_generated_tokens / std::max(s.generation_seconds, 1e-9), runtime::stop_reason_name(result->reason));
  const runtime::KvBytes kv = session->kv_bytes();
  fmt::print(stderr, "KV cache:   {:8.1f} MiB for {} tokens (full-length layers {:.1f} MiB, sliding-window rings {:.1f} MiB)\n",
             kv.total() / 1048576.0, session->n_ctx(), kv.full / 1048576.0, kv.ring / 1048576.0);
  if (s.n_context_shifts > 0) fmt::print(stderr, "context shifts: {}\n", s.n_context_shifts);
}

}  // namespace

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Complete a prompt and stream the text");
  auto o = std::make_shared<RunOptions>();
  add_model_options(cmd, o->model);
  cmd->add_option("-p,--prompt", o->prompt, "prompt text (empty: start from BOS)");
  cmd->add_option("-f,--file", o->prompt_file, "read the prompt from a file")->check(CLI::ExistingFile);
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", o->sampling.temperature, "temperature (0: greedy)");
  cmd->add_option("--top-k", o->sampling.top_k, "top-k (0: off)");
  cmd->add_option("--top-p", o->sampling.top_p, "top-p (1: off)");
  cmd->add_option("--min-p", o->sampling.min_p, "min-p (0: off)");
  cmd->add_option("--repeat-penalty", o->sampling.repeat_penalty, "repetition penalty (1: off)");
  cmd->add_option("--repeat-last-n", o->sampling.penalty_last_n, "tokens the penalties look back over");
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "frequency penalty");
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "presence penalty");
  cmd->add_option("--seed", o->sampling.seed, "random seed (same seed, same text)");
  cmd->add_option("--n-keep", o->n_keep, "tokens kept at the start on a context shift (-1: the prompt)");
  cmd->add_option("--stop", o->stop, "stop before this string (repeatable)");
  cmd->add_flag("--no-bos", o->no_bos, "do not add BOS even if the vocabulary asks for it");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "generate all -n tokens, past end-of-generation tokens");
  cmd->add_flag("--special", o->special, "parse special-token texts in the prompt");
  cmd->add_flag("--chat", o->chat, "format the prompt as a user message with the model's chat template");
  cmd->add_option("--system", o->system, "with --chat: system prompt")->needs(cmd->get_option("--chat"));
  cmd->callback([o] { run(*o); });
}

}  // namespace cera::cli
