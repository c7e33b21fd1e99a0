// cera._cera.Engine: the facade's Engine with the GIL released around every call that works
// (loading, generating, tokenizing, embedding), so other Python threads run meanwhile and several
// may use one engine at once (the facade allows it). The blocking generate()/chat() are a Stream
// read to its end, so Ctrl-C cancels them like a streamed reply.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "stream.h"

namespace cera::python {
namespace {

class PyEngine {
 public:
  PyEngine(std::shared_ptr<Engine> engine, std::string path) : engine_(std::move(engine)), path_(std::move(path)) {}

  // The engine for one call; a copy, so that close() on another thread cannot free it mid-call.
  std::shared_ptr<Engine> get() const {
    if (!engine_) {
      throw_error(ErrorKind::kUnavailable,
                  "this cera.Engine of '" + path_ + "' is closed: make a new cera.Engine to use the model again");
    }
    return engine_;
  }
  // Streams still open keep the engine alive; it is freed when the last of them closes.
  void close() {
    std::shared_ptr<Engine> e = std::move(engine_);
    nb::gil_scoped_release unlocked;  // freeing it joins the engine's loop thread
    e.reset();
  }
  bool closed() const { return !engine_; }
  const std::string& path() const { return path_; }

 private:
  std::shared_ptr<Engine> engine_;
  std::string path_;
};

PyEngine load(const EngineConfig& config) {
  Expected<std::unique_ptr<Engine>> e = [&] {
    nb::gil_scoped_release unlocked;
    return Engine::load(config);
  }();
  return PyEngine(std::shared_ptr<Engine>(value_or_throw(std::move(e))), config.model_path);
}

PyStream* start(const PyEngine& self, const std::string& prompt, const GenerateOptions& options) {
  std::shared_ptr<Engine> engine = self.get();
  Expected<std::unique_ptr<Stream>> s = [&] {
    nb::gil_scoped_release unlocked;
    return engine->start(prompt, options);
  }();
  return new PyStream(std::move(engine), value_or_throw(std::move(s)));
}

PyStream* start_chat(const PyEngine& self, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  std::shared_ptr<Engine> engine = self.get();
  Expected<std::unique_ptr<Stream>> s = [&] {
    nb::gil_scoped_release unlocked;
    return engine->start_chat(messages, options);
  }();
  return new PyStream(std::move(engine), value_or_throw(std::move(s)));
}

Completion read_to_end(PyStream* stream) {
  std::unique_ptr<PyStream> owned(stream);
  return owned->result();  // a KeyboardInterrupt cancels it; `owned` then frees it
}

void bind_model_info(nb::module_& m) {
  nb::class_<ModelInfo>(m, "ModelInfo", "What was loaded (cera::ModelInfo).")
      .def_ro("architecture", &ModelInfo::architecture, "general.architecture: 'llama', 'qwen3', 'bert', ...")
      .def_ro("name", &ModelInfo::name, "general.name, or the file's stem.")
      .def_ro("device", &ModelInfo::device, "The backend: 'cpu (avx2, 2 threads)', 'cuda (NVIDIA H200)'.")
      .def_ro("n_vocab", &ModelInfo::n_vocab)
      .def_ro("n_embd", &ModelInfo::n_embd, "Width of embed()'s vectors.")
      .def_ro("n_ctx_train", &ModelInfo::n_ctx_train)
      .def_ro("n_ctx", &ModelInfo::n_ctx, "Tokens per request here; 0: no generation.")
      .def_ro("generates", &ModelInfo::generates, "False: an encoder (bert) that only embeds.")
      .def_ro("has_chat_template", &ModelInfo::has_chat_template)
      .def_prop_ro("default_pooling", [](const ModelInfo& i) { return pooling_name(i.default_pooling); },
                   "The pooling embed() uses when none is given.")
      .def("__repr__", [](const ModelInfo& i) {
        return nb::str("ModelInfo(architecture={!r}, name={!r}, device={!r}, n_ctx={})")
            .format(i.architecture, i.name, i.device, i.n_ctx);
      });

  nb::class_<Embedding>(m, "Embedding", "One text's embedding.")
      .def_ro("values", &Embedding::values, "[n_embd] floats, or [n_tokens * n_embd] token-major for pooling 'none'.")
      .def_ro("n_tokens", &Embedding::n_tokens);
}

}  // namespace

void bind_engine(nb::module_& m) {
  bind_model_info(m);

  nb::class_<PyEngine>(m, "Engine", "A loaded model (the facade's cera::Engine); cera.Engine wraps it.")
      .def_static("load", &load, nb::arg("config"), "Loads the model; the GIL is released meanwhile.")
      .def_prop_ro("info", [](const PyEngine& e) { return e.get()->info(); })
      .def_prop_ro("path", &PyEngine::path)
      .def_prop_ro("closed", &PyEngine::closed)
      .def("close", &PyEngine::close)
      .def("start", &start, nb::arg("prompt"), nb::arg("options"), nb::rv_policy::take_ownership)
      .def("start_chat", &start_chat, nb::arg("messages"), nb::arg("options"), nb::rv_policy::take_ownership)
      .def(
          "generate",
          [](const PyEngine& e, const std::string& prompt, const GenerateOptions& o) {
            return read_to_end(start(e, prompt, o));
          },
          nb::arg("prompt"), nb::arg("options"))
      .def(
          "chat",
          [](const PyEngine& e, const std::vector<ChatMessage>& messages, const ChatOptions& o) {
            return read_to_end(start_chat(e, messages, o));
          },
          nb::arg("messages"), nb::arg("options"))
      .def(
          "render_chat",
          [](const PyEngine& self, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
             const std::string& template_kwargs_json) {
            std::shared_ptr<Engine> e = self.get();
            Expected<std::string> r = [&] {
              nb::gil_scoped_release unlocked;
              return e->render_chat(messages, add_generation_prompt, template_kwargs_json);
            }();
            return to_str(value_or_throw(std::move(r)));
          },
          nb::arg("messages"), nb::arg("add_generation_prompt"), nb::arg("template_kwargs_json"))
      .def(
          "tokenize",
          [](const PyEngine& self, const std::string& text, bool add_special, bool parse_special) {
            std::shared_ptr<Engine> e = self.get();
            Expected<std::vector<int32_t>> r = [&] {
              nb::gil_scoped_release unlocked;
              return e->tokenize(text, add_special, parse_special);
            }();
            return value_or_throw(std::move(r));
          },
          nb::arg("text"), nb::arg("add_special"), nb::arg("parse_special"))
      .def(
          "detokenize",
          [](const PyEngine& self, const std::vector<int32_t>& tokens, bool render_special) {
            std::shared_ptr<Engine> e = self.get();
            Expected<std::string> r = [&] {
              nb::gil_scoped_release unlocked;
              return e->detokenize(tokens, render_special);
            }();
            return to_str(value_or_throw(std::move(r)));
          },
          nb::arg("tokens"), nb::arg("render_special"))
      .def(
          "embed",
          [](const PyEngine& self, const std::vector<std::string>& texts, const EmbedOptions& o) {
            std::shared_ptr<Engine> e = self.get();
            Expected<std::vector<Embedding>> r = [&] {
              nb::gil_scoped_release unlocked;
              return e->embed(texts, o);
            }();
            return value_or_throw(std::move(r));
          },
          nb::arg("texts"), nb::arg("options"));
}

}  // namespace cera::python
