// `cera tokenize -m FILE (-p TEXT | --file PATH) [--ids] [--bos] [--special]`: the token ids of a
// text under a GGUF file's vocabulary. Pieces are printed escaped (\n, \t, \xNN for control
// bytes and bytes that are not valid UTF-8) so one token is always exactly one output line.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "format/gguf.h"
#include "output.h"
#include "text_input.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string prompt;
  std::string file;
  bool ids = false;
  bool bos = false;
  bool special = false;
  int64_t max_input_mib = kDefaultMaxInputMiB;
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "cera tokenize: %s\n", message.c_str());
  throw CLI::RuntimeError(1);
}

void append_escaped(std::string_view piece, std::string& out) {
  for (size_t at = 0; at < piece.size();) {
    const auto c = static_cast<unsigned char>(piece[at]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      // A multi-byte character is copied whole; a byte that starts no valid one is escaped.
      size_t next = at;
      const uint32_t cp = tokenizer::unicode::decode_utf8(piece, next);
      if (cp == tokenizer::unicode::kReplacementChar && next - at == 1) {
        out += fmt::format("\\x{:02x}", c);
      } else {
        out.append(piece.substr(at, next - at));
      }
      at = next;
      continue;
    }
    ++at;
  }
}

void run(const TokenizeOptions& opts) {
  std::string text = opts.prompt;
  if (!opts.file.empty()) {
    auto read = read_text_input("tokenize", opts.file, opts.max_input_mib);
    if (!read.ok()) fail(read.status().to_string());
    text = std::move(read).value();
  }
  auto file = format::GgufFile::open(opts.model);
  if (!file.ok()) fail(file.status().to_string());  // the reader names the path
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  if (!tok.ok()) fail(tok.status().with_context(opts.model).to_string());
  if (text.size() >= (size_t{1} << 32)) fail("input of 4 GiB or more");

  const tokenizer::EncodeOptions enc{.add_special = opts.bos, .parse_special = opts.special};
  const std::vector<int32_t> ids = tok->encode(text, enc);

  std::string out;
  if (opts.ids) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
    }
    out += '\n';
  } else {
    for (int32_t id : ids) {
      out += std::to_string(id);
      out += '\t';
      append_escaped(tok->token_piece(id, /*render_special=*/true), out);
      out += '\n';
    }
  }
  stdout_write(out);
  fail_if_stdout_failed();  // main's final flush catches what is still buffered
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text under a GGUF vocabulary");
  cmd->add_option("-m,--model", opts->model, "GGUF file with tokenizer.ggml.* metadata")->required();
  auto* prompt = cmd->add_option("-p,--prompt", opts->prompt, "Text to tokenize");
  auto* file = cmd->add_option("--file", opts->file, "Read the text from this file (bytes as is)");
  prompt->excludes(file);
  file->excludes(prompt);
  add_max_input_option(cmd, opts->max_input_mib);
  cmd->add_flag("--ids", opts->ids, "Print only the ids, space-separated on one line");
  cmd->add_flag("--bos", opts->bos,
                "Add BOS/EOS (BERT: [CLS]/[SEP]) as the vocabulary's add_*_token flags say");
  cmd->add_flag("--special", opts->special, "Parse control-token texts such as <s> into their ids");
  cmd->callback([opts, prompt, file] {
    if (prompt->count() == 0 && file->count() == 0) {
      throw CLI::ValidationError("tokenize", "give the text: -p TEXT or --file PATH");
    }
    run(*opts);
  });
}

}  // namespace cera::cli
