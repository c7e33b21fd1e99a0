// `cera embed -m FILE (-p TEXT ... | -f FILE) [--pooling P] [--no-normalize] [--format F] [-o OUT]`:
// embedding vectors of texts, through the same EmbedService as the server and the libraries.
// -f reads one text per line (a file of sentences, as retrieval pipelines keep them); an empty
// line is refused by its number rather than skipped, so the n-th output is always the n-th line.
// Texts are embedded in groups of about --batch tokens with a progress bar on a terminal, and a
// summary (texts, tokens, seconds, texts/s) goes to stderr so stdout stays data.
// Output: `json` (default) is one document {model, pooling, normalized, n_embd, data: [{index,
// tokens, embedding}]}, with a matrix [tokens][n_embd] per text for --pooling none; `tsv` is a
// row per vector: the text's index, for --pooling none the token's position, then the values.
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "arg_checks.h"
#include "commands.h"
#include "model_options.h"
#include "output.h"
#include "progress.h"
#include "runtime/embed/embed_service.h"
#include "text_input.h"

namespace cera::cli {
namespace {

enum class EmbedFormat { kJson, kTsv };

struct EmbedCliOptions {
  ModelOptions model;
  std::vector<std::string> prompts;
  std::string file;
  std::string output;  // empty: stdout
  std::string pooling;  // empty: the model's
  bool no_normalize = false;
  std::string format = "json";
  int64_t max_input_mib = kDefaultMaxInputMiB;
};

[[noreturn]] void fail_embed(const std::string& message) {
  std::fprintf(stderr, "cera embed: %s\n", message.c_str());
  throw CLI::RuntimeError(1);
}

// The lines of `text`, one text each; a final newline ends the last line (it starts no new one).
std::vector<std::string> split_lines(const std::string& text, const std::string& path) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    if (line.empty()) {
      fail_embed(fmt::format("{}: line {} is empty: every line is a text to embed; remove the empty line", path,
                             lines.size() + 1));
    }
    lines.push_back(std::move(line));
    at = end + 1;
  }
  if (lines.empty()) fail_embed(fmt::format("{} is empty: give one text per line", path));
  return lines;
}

// A float as the shortest text that reads back as the same float.
void append_float(std::string& out, float v) { fmt::format_to(std::back_inserter(out), "{}", v); }

void append_vector(std::string& out, const float* v, int32_t n, char sep) {
  for (int32_t k = 0; k < n; ++k) {
    if (k) out += sep;
    append_float(out, v[k]);
  }
}

std::string render(const std::vector<runtime::embed::Embedding>& embeddings, EmbedFormat format, bool per_token,
                   int32_t n_embd, const std::string& header) {
  std::string out;
  if (format == EmbedFormat::kTsv) {
    for (size_t i = 0; i < embeddings.size(); ++i) {
      const auto& e = embeddings[i];
      const int32_t rows = per_token ? e.n_tokens : 1;
      for (int32_t t = 0; t < rows; ++t) {
        out += std::to_string(i);
        if (per_token) out += '\t' + std::to_string(t);
        out += '\t';
        append_vector(out, e.values.data() + static_cast<size_t>(t) * n_embd, n_embd, '\t');
        out += '\n';
      }
    }
    return out;
  }
  out = header + ",\"data\":[";
  for (size_t i = 0; i < embeddings.size(); ++i) {
    const auto& e = embeddings[i];
    if (i) out += ',';
    out += fmt::format("\n{{\"index\":{},\"tokens\":{},\"embedding\":", i, e.n_tokens);
    if (per_token) {
      out += '[';
      for (int32_t t = 0; t < e.n_tokens; ++t) {
        out += t ? ",[" : "[";
        append_vector(out, e.values.data() + static_cast<size_t>(t) * n_embd, n_embd, ',');
        out += ']';
      }
      out += ']';
    } else {
      out += '[';
      append_vector(out, e.values.data(), n_embd, ',');
      out += ']';
    }
    out += '}';
  }
  out += "\n]}\n";
  return out;
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty()) {
    stdout_write(text);
    fail_if_stdout_failed();
    return;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fail_embed(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int err = errno;
  if (std::fclose(f) != 0 || !wrote) fail_embed(fmt::format("writing {} failed: {}", path, std::strerror(wrote ? errno : err)));
}

void run(const EmbedCliOptions& opts) {
  std::vector<std::string> texts = opts.prompts;
  if (!opts.file.empty()) {
    auto read = read_text_input("embed", opts.file, opts.max_input_mib);
    if (!read.ok()) fail_embed(read.status().to_string());
    texts = split_lines(*read, opts.file);
  }
  runtime::embed::EmbedOptions options;
  if (!opts.pooling.empty()) {
    options.pooling = runtime::embed::pooling_from_name(opts.pooling);
    if (!options.pooling) {
      fail_embed(fmt::format("--pooling {}: use mean, cls, last or none", opts.pooling));
    }
  }
  if (opts.no_normalize) options.normalize = false;
  const EmbedFormat format = opts.format == "tsv" ? EmbedFormat::kTsv : EmbedFormat::kJson;

  std::unique_ptr<api::Engine> engine = load_engine_or_exit("embed", opts.model);
  // No engine loop: this command generates nothing, so the embedder has the model to itself.
  runtime::embed::EmbedService service(engine->model(), engine->tokenizer(), /*loop=*/nullptr,
                                       {.max_batch_tokens = opts.model.batch});
  const runtime::embed::Pooling pooling = options.pooling.value_or(service.default_pooling());
  const bool normalized = options.normalize.value_or(engine->model().hparams().embedding_normalize);

  // Groups of about --batch tokens (a text never splits), so the bar moves on long files.
  std::vector<std::vector<int32_t>> tokens;
  tokens.reserve(texts.size());
  for (const std::string& text : texts) tokens.push_back(runtime::embed::tokenize_for_embedding(engine->tokenizer(), text));
  std::vector<runtime::embed::Embedding> embeddings;
  embeddings.reserve(texts.size());
  ProgressBar bar("embedding");
  int64_t n_tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t first = 0; first < tokens.size();) {
    size_t last = first;
    int64_t group_tokens = 0;
    while (last < tokens.size() && (last == first || group_tokens + static_cast<int64_t>(tokens[last].size()) <= opts.model.batch * 4)) {
      group_tokens += static_cast<int64_t>(tokens[last].size());
      ++last;
    }
    std::vector<std::vector<int32_t>> group(tokens.begin() + static_cast<ptrdiff_t>(first),
                                            tokens.begin() + static_cast<ptrdiff_t>(last));
    auto result = service.embed_tokens(group, options);
    if (!result.ok()) {
      // The service names the input by its index in the group; say which text that is.
      fail_embed(fmt::format("{} (input numbers count from text {}{})", result.status().to_string(), first,
                             opts.file.empty() ? "" : fmt::format(", line {} of {}", first + 1, opts.file)));
    }
    for (auto& e : *result) {
      n_tokens += e.n_tokens;
      embeddings.push_back(std::move(e));
    }
    first = last;
    bar.update(first, tokens.size());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int32_t n_embd = service.n_embd();
  const std::string header =
      fmt::format("{{\"model\":{},\"pooling\":\"{}\",\"normalized\":{},\"n_embd\":{}", nlohmann::json(opts.model.model).dump(),
                  runtime::embed::pooling_name(pooling), normalized ? "true" : "false", n_embd);
  write_output(opts.output, render(embeddings, format, pooling == runtime::embed::Pooling::kNone, n_embd, header));
  std::fprintf(stderr, "cera embed: %zu texts (%lld tokens) in %.3f s: %.1f texts/s, %.0f tokens/s\n", texts.size(),
               static_cast<long long>(n_tokens), seconds, texts.size() / std::max(seconds, 1e-9),
               n_tokens / std::max(seconds, 1e-9));
}

}  // namespace

void register_embed(CLI::App& app) {
  auto opts = std::make_shared<EmbedCliOptions>();
  CLI::App* cmd = app.add_subcommand("embed", "Embedding vectors of texts (pooled, L2-normalised)");
  add_model_options(cmd, opts->model);
  auto* prompt = cmd->add_option("-p,--prompt", opts->prompts, "A text to embed (repeat for several)");
  auto* file = cmd->add_option("-f,--file", opts->file, "Read the texts from this file, one per line");
  prompt->excludes(file);
  file->excludes(prompt);
  add_max_input_option(cmd, opts->max_input_mib);
  cmd->add_option("--pooling", opts->pooling, "mean, cls, last or none (a vector per token); default: the model's")
      ->check(CLI::IsMember({"mean", "cls", "last", "none"}));
  cmd->add_flag("--no-normalize", opts->no_normalize, "Leave the vectors as pooled (default: the model's, L2 for most)");
  cmd->add_option("--format", opts->format, "json or tsv")->check(CLI::IsMember({"json", "tsv"}))->capture_default_str();
  cmd->add_option("-o,--output", opts->output, "Write the vectors to this file (default: stdout)");
  cmd->callback([opts, prompt, file] {
    if (prompt->count() == 0 && file->count() == 0) {
      throw CLI::ValidationError("embed", "give the texts: -p TEXT (repeatable) or -f FILE (one per line)");
    }
    run(*opts);
  });
}

}  // namespace cera::cli
