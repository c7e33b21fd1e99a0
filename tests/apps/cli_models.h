// Variants of the stories260K test model for the command-line tests, made with GgufWriter from the
// imported GGUF: one with a chat template (for `cera chat`), one with a metadata string that is
// not UTF-8 (for `inspect --json`).
#pragma once

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>

#include "format/gguf_writer.h"
#include "stories_model.h"

namespace cera::test {

// stories260K with extra or replaced metadata keys, written once per test process as `name`.
inline std::filesystem::path stories_variant(const std::string& name,
                                             const std::function<void(format::GgufWriter&)>& edit) {
  auto f = format::GgufFile::open(stories_gguf());
  if (!f.ok()) throw std::runtime_error(f.status().to_string());
  format::GgufWriter w;
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  edit(w);
  for (const auto& t : f->tensors()) {
    if (!w.add_tensor_view({t.name, t.dtype, t.shape}, f->tensor_data(t)).ok())
      throw std::runtime_error(t.name);
  }
  const auto out = temp_dir() / name;
  if (!w.write(out).ok()) throw std::runtime_error("cannot write " + out.string());
  return out;
}

// A chat template that joins the messages' text, and EOS moved to <unk> (id 0), which the model
// never produces: a reply then runs until -n, long enough to be interrupted.
inline std::filesystem::path stories_chat_gguf() {
  static const std::filesystem::path path =
      stories_variant("stories-chat.gguf", [](format::GgufWriter& w) {
        w.set_string("tokenizer.chat_template",
                     "{% for m in messages %}{{ m['content'] }}{% endfor %}");
        w.set_u32("tokenizer.ggml.eos_token_id", 0);
      });
  return path;
}

// general.name holds the bytes "bad \xff\xfe name": not UTF-8.
inline std::filesystem::path stories_non_utf8_gguf() {
  static const std::filesystem::path path = stories_variant(
      "stories-non-utf8.gguf",
      [](format::GgufWriter& w) { w.set_string("general.name", "bad \xff\xfe name"); });
  return path;
}

}  // namespace cera::test
