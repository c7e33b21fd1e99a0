// `cera logits`: the model's next-token distribution at every prompt position, top K each;
// --dump writes every logit (float32, [n_tokens][n_vocab]) for comparisons against a reference.
// The prompt must fit the context: -c, or the model's training context when -c is 0 (the session
// itself holds only the prompt's tokens then, so a long training context costs no memory).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "arg_checks.h"
#include "core/output_file.h"
#include "model_options.h"
#include "output.h"
#include "text_input.h"

namespace cera::cli {
namespace {

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out;
}

// Whitespace-separated decimal token ids; a word that is not one is an error naming it.
Result<std::vector<int32_t>> parse_ids(const std::string& path, const std::string& text, int32_t n_vocab) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (true) {
    at = text.find_first_not_of(" \t\r\n\v\f", at);
    if (at == std::string::npos) break;
    const size_t end = std::min(text.find_first_of(" \t\r\n\v\f", at), text.size());
    const std::string_view word(text.data() + at, end - at);
    int64_t id = -1;
    const auto r = std::from_chars(word.data(), word.data() + word.size(), id);
    if (r.ec != std::errc() || r.ptr != word.data() + word.size()) {
      return invalid_argument(fmt::format("'{}': '{}' at byte {} is not a token id", path,
                                          printable(word.substr(0, 40)), at));
    }
    if (id < 0 || id >= n_vocab) {
      return invalid_argument(fmt::format("'{}': token id {} is outside the vocabulary (0 to {})", path, id, n_vocab - 1));
    }
    ids.push_back(static_cast<int32_t>(id));
    at = end;
  }
  return ids;
}

// The dump goes through OutputFile (core/output_file.h): never a device, a directory or the
// model itself (which is mapped: truncating it would crash this very process), and a failed
// write leaves no partial file.
Status check_dump_path(const std::string& dump, const std::string& model) {
  const std::filesystem::path inputs[] = {model};
  const Status st = check_output_path(dump, inputs);
  return st.ok() ? st : st.with_context("--dump '" + dump + "'");
}

Status write_dump(const std::string& path, const std::string& model, std::span<const float> logits) {
  const std::filesystem::path inputs[] = {model};
  auto out = OutputFile::create(path, inputs);
  Status st = out.ok() ? out->write(std::as_bytes(logits)) : out.status();
  if (st.ok()) st = out->commit();
  return st.ok() ? st : st.with_context("--dump: cannot write '" + path + "'");
}

}  // namespace

void register_logits(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Print the top next-token logits at every prompt position");
  struct Options {
    ModelOptions model;
    std::string prompt;
    std::string ids_file;
    std::string dump;
    int top = 5;
    bool no_bos = false;
    int64_t max_input_mib = kDefaultMaxInputMiB;
  };
  auto o = std::make_shared<Options>();
  add_model_options(cmd, o->model);
  auto* prompt = cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  auto* ids = cmd->add_option("--ids-file", o->ids_file, "read token ids (whitespace separated) instead of text");
  prompt->excludes(ids);
  add_max_input_option(cmd, o->max_input_mib);
  cmd->add_option("--dump", o->dump, "write all logits as float32 [n_tokens][n_vocab] to this file");
  cmd->add_option("--top", o->top, "candidates shown per position")->check(int_range(1, kInt32Max));
  cmd->add_flag("--no-bos", o->no_bos, "do not add BOS");
  cmd->callback([o] {
    if (!o->dump.empty()) {
      if (Status st = check_dump_path(o->dump, o->model.model); !st.ok()) fail("logits", st);
    }
    std::string ids_text;
    if (!o->ids_file.empty()) {
      auto text = read_text_input("logits", o->ids_file, o->max_input_mib);
      if (!text.ok()) fail("logits", text.status());
      ids_text = std::move(text).value();
    }
    auto engine = load_engine_or_exit("logits", o->model);
    const tokenizer::Tokenizer& tok = engine->tokenizer();
    std::vector<int32_t> ids;
    if (!o->ids_file.empty()) {
      auto parsed = parse_ids(o->ids_file, ids_text, tok.n_vocab());
      if (!parsed.ok()) fail("logits", parsed.status());
      ids = std::move(parsed).value();
    } else {
      ids = tok.encode(o->prompt, {.add_special = !o->no_bos, .parse_special = false});
    }
    if (ids.empty()) fail("logits", invalid_argument("the prompt has no tokens"));
    const int32_t n_ctx_train = engine->model().hparams().n_ctx_train;
    const int64_t limit = o->model.ctx > 0 ? o->model.ctx : n_ctx_train;
    if (static_cast<int64_t>(ids.size()) > limit) {
      fail("logits", out_of_range(fmt::format(
                         "the prompt has {} tokens but the context holds {} ({}): give -c {} or more, or a shorter "
                         "prompt",
                         ids.size(), limit,
                         o->model.ctx > 0 ? "-c" : fmt::format("the model's training context; -c sets another"),
                         ids.size())));
    }
    const auto ctx = static_cast<int32_t>(o->model.ctx > 0 ? o->model.ctx : static_cast<int64_t>(ids.size()));
    auto session = new_session_or_exit("logits", *engine, {.n_ctx = ctx, .n_batch = o->model.batch, .context_shift = false});
    if (Status st = session->append_tokens(ids, true); !st.ok()) fail("logits", st);
    const auto logits = session->all_logits();
    const int32_t n_vocab = engine->model().hparams().n_vocab;
    if (!o->dump.empty()) {
      if (Status st = write_dump(o->dump, o->model.model, logits); !st.ok()) fail("logits", st);
      fmt::print(stderr, "wrote {} x {} logits to {}\n", ids.size(), n_vocab, o->dump);
      return;
    }
    const int k = std::min(o->top, n_vocab);
    std::vector<int32_t> order(n_vocab);
    std::string line;
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const float* row = logits.data() + pos * n_vocab;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      line = fmt::format("{:4d} {:6d} {:<16}", pos, ids[pos], "'" + printable(tok.token_text(ids[pos])) + "'");
      for (int i = 0; i < k; ++i) {
        line += fmt::format("  {}:'{}'={:.4f}", order[i], printable(tok.token_text(order[i])), row[order[i]]);
      }
      line += '\n';
      if (!stdout_write(line)) fail_if_stdout_failed();  // stops at the first failed row
    }
  });
}

}  // namespace cera::cli
