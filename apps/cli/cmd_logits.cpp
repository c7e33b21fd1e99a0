// `cera logits`: the model's next-token distribution at every prompt position, top K each;
// --dump writes every logit (float32, [n_tokens][n_vocab]) for comparisons against a reference.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "model_options.h"

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
  };
  auto o = std::make_shared<Options>();
  add_model_options(cmd, o->model);
  auto* prompt = cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  auto* ids = cmd->add_option("--ids-file", o->ids_file, "read token ids (whitespace separated) instead of text")
                  ->check(CLI::ExistingFile);
  prompt->excludes(ids);
  cmd->add_option("--dump", o->dump, "write all logits as float32 [n_tokens][n_vocab] to this file");
  cmd->add_option("--top", o->top, "candidates shown per position")->check(CLI::PositiveNumber);
  cmd->add_flag("--no-bos", o->no_bos, "do not add BOS");
  cmd->callback([o] {
    auto engine = load_engine_or_exit("logits", o->model);
    const tokenizer::Tokenizer& tok = engine->tokenizer();
    std::vector<int32_t> ids;
    if (!o->ids_file.empty()) {
      std::ifstream in(o->ids_file);
      for (int64_t id; in >> id;) {
        if (id < 0 || id >= tok.n_vocab()) fail("logits", invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary"));
        ids.push_back(static_cast<int32_t>(id));
      }
    } else {
      ids = tok.encode(o->prompt, {.add_special = !o->no_bos, .parse_special = false});
    }
    if (ids.empty()) fail("logits", invalid_argument("the prompt has no tokens"));
    const int32_t ctx = std::max<int32_t>(o->model.ctx, static_cast<int32_t>(ids.size()));
    auto session = new_session_or_exit("logits", *engine, {.n_ctx = ctx, .n_batch = o->model.batch, .context_shift = false});
    if (Status st = session->append_tokens(ids, true); !st.ok()) fail("logits", st);
    const auto logits = session->all_logits();
    const int32_t n_vocab = engine->model().hparams().n_vocab;
    if (!o->dump.empty()) {
      std::ofstream out(o->dump, std::ios::binary);
      out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size_bytes()));
      if (!out) fail("logits", io_error("cannot write '" + o->dump + "'"));
      fmt::print(stderr, "wrote {} x {} logits to {}\n", ids.size(), n_vocab, o->dump);
      return;
    }
    const int k = std::min(o->top, n_vocab);
    std::vector<int32_t> order(n_vocab);
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const float* row = logits.data() + pos * n_vocab;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      fmt::print("{:4d} {:6d} {:<16}", pos, ids[pos], "'" + printable(tok.token_text(ids[pos])) + "'");
      for (int i = 0; i < k; ++i) {
        fmt::print("  {}:'{}'={:.4f}", order[i], printable(tok.token_text(order[i])), row[order[i]]);
      }
      fmt::print("\n");
    }
  });
}

}  // namespace cera::cli
