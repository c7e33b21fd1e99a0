// The facade's option structs as Python classes with read-write attributes (EngineConfig,
// SamplingOptions, Constraint, GenerateOptions, ChatOptions, EmbedOptions, ChatMessage). The
// package's keyword arguments (cera/_engine.py) fill them in. Closed sets travel as the strings
// a Python caller writes ("cpu", "mean"), checked on assignment; integers are taken as 64-bit
// and narrowed here, so 2**40 is an InvalidArgumentError naming the field instead of a TypeError.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bindings.h"

namespace cera::python {
namespace {

template <class E>
struct Named {
  E value;
  const char* name;
};

constexpr Named<DeviceChoice> kDevices[] = {
    {DeviceChoice::kAuto, "auto"}, {DeviceChoice::kCpu, "cpu"}, {DeviceChoice::kCuda, "cuda"}};
constexpr Named<KvType> kKvTypes[] = {{KvType::kAuto, "auto"}, {KvType::kF32, "f32"}, {KvType::kF16, "f16"}};
constexpr Named<Pooling> kPoolings[] = {
    {Pooling::kNone, "none"}, {Pooling::kMean, "mean"}, {Pooling::kCls, "cls"}, {Pooling::kLast, "last"}};
constexpr Named<ConstraintKind> kConstraints[] = {{ConstraintKind::kNone, "none"},
                                                  {ConstraintKind::kGbnf, "gbnf"},
                                                  {ConstraintKind::kJsonSchema, "json_schema"},
                                                  {ConstraintKind::kJsonObject, "json_object"}};

template <class E, size_t N>
E parse(const char* field, const Named<E> (&table)[N], std::string_view text) {
  std::string choices;
  for (const Named<E>& n : table) {
    if (text == n.name) return n.value;
    choices += (choices.empty() ? "'" : ", '") + std::string(n.name) + "'";
  }
  throw_error(ErrorKind::kInvalidArgument,
              std::string(field) + " '" + std::string(text) + "' is not one of " + choices);
}

template <class E, size_t N>
const char* name_of(const Named<E> (&table)[N], E value) {
  for (const Named<E>& n : table) {
    if (n.value == value) return n.name;
  }
  return "?";
}

int32_t narrow(const char* field, int64_t v) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    throw_error(ErrorKind::kInvalidArgument, std::string(field) + " " + std::to_string(v) +
                                                 " does not fit in 32 bits: give a value from -2147483648 to "
                                                 "2147483647");
  }
  return static_cast<int32_t>(v);
}

// An int32 member as a property that takes any Python int and names the field when it is too big.
template <class C>
void int32_field(nb::class_<C>& cls, const char* name, int32_t C::*member, const char* doc) {
  cls.def_prop_rw(
      name, [member](const C& c) { return c.*member; },
      [member, name](C& c, int64_t v) { c.*member = narrow(name, v); }, doc);
}

std::optional<uint64_t> seed_from(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr())) {
    throw nb::type_error("seed must be an int or None");
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(h.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw_error(ErrorKind::kInvalidArgument, "seed " + nb::cast<std::string>(nb::str(h)) +
                                                 " must be from 0 to 18446744073709551615 (or None: random)");
  }
  return static_cast<uint64_t>(v);
}

void bind_engine_config(nb::module_& m) {
  nb::class_<EngineConfig> c(m, "EngineConfig", "How to load a model (cera::EngineConfig).");
  c.def(nb::init<>());
  c.def_rw("model_path", &EngineConfig::model_path, "A GGUF file.");
  c.def_prop_rw(
      "device", [](const EngineConfig& e) { return name_of(kDevices, e.device); },
      [](EngineConfig& e, std::string_view v) { e.device = parse("device", kDevices, v); },
      "'auto' (CUDA when a GPU is there, else the CPU), 'cpu' or 'cuda'.");
  int32_field(c, "n_ctx", &EngineConfig::n_ctx,
              "Tokens per request (prompt + output); 0: the model's training context, at most 4096.");
  int32_field(c, "n_threads", &EngineConfig::n_threads, "CPU threads; 0: every core this process may use.");
  int32_field(c, "max_parallel", &EngineConfig::max_parallel, "Requests generating at once; more wait in a queue.");
  int32_field(c, "max_batch_tokens", &EngineConfig::max_batch_tokens,
              "Tokens per forward: prompt chunks, and the longest text embed() takes.");
  int32_field(c, "tensor_parallel", &EngineConfig::tensor_parallel,
              "Ranks the model is split over (CUDA: GPUs 0..N-1; CPU: backends sharing n_threads); 1 to 8.");
  c.def_prop_rw(
      "kv_type", [](const EngineConfig& e) { return name_of(kKvTypes, e.kv_type); },
      [](EngineConfig& e, std::string_view v) { e.kv_type = parse("kv_type", kKvTypes, v); },
      "Element type of the KV cache: 'auto', 'f32' or 'f16'.");
}

void bind_sampling(nb::module_& m) {
  nb::class_<SamplingOptions> s(m, "SamplingOptions",
                                "The sampling chain: penalties, top-k, top-p, min-p, temperature (cera::SamplingOptions).");
  s.def(nb::init<>());
  s.def_rw("temperature", &SamplingOptions::temperature, "0: greedy.");
  int32_field(s, "top_k", &SamplingOptions::top_k, "<= 0: off.");
  s.def_rw("top_p", &SamplingOptions::top_p, ">= 1: off.");
  s.def_rw("min_p", &SamplingOptions::min_p, "<= 0: off.");
  s.def_rw("repeat_penalty", &SamplingOptions::repeat_penalty);
  int32_field(s, "penalty_last_n", &SamplingOptions::penalty_last_n, "Tokens the penalties look back over.");
  s.def_rw("frequency_penalty", &SamplingOptions::frequency_penalty);
  s.def_rw("presence_penalty", &SamplingOptions::presence_penalty);
  s.def_prop_rw(
      "seed", [](const SamplingOptions& o) { return o.seed; },
      [](SamplingOptions& o, nb::handle v) { o.seed = seed_from(v); },
      "The same seed, prompt and options give the same text; None: random.");
}

void bind_generate_options(nb::module_& m) {
  nb::class_<Constraint> k(m, "Constraint", "Structured output: the reply is constrained to a grammar.");
  k.def(nb::init<>());
  k.def_prop_rw(
      "kind", [](const Constraint& c) { return name_of(kConstraints, c.kind); },
      [](Constraint& c, std::string_view v) { c.kind = parse("constraint kind", kConstraints, v); },
      "'none', 'gbnf' (source: a GBNF grammar, root rule 'root'), 'json_schema' (source: a JSON Schema) or "
      "'json_object' (any JSON object).");
  k.def_rw("source", &Constraint::source);

  nb::class_<GenerateOptions> g(m, "GenerateOptions", "One generation's options (cera::GenerateOptions).");
  g.def(nb::init<>());
  int32_field(g, "max_tokens", &GenerateOptions::max_tokens, ">= 0.");
  g.def_rw("sampling", &GenerateOptions::sampling);
  g.def_rw("stop", &GenerateOptions::stop, "The reply ends before any of these.");
  g.def_rw("constraint", &GenerateOptions::constraint);
  g.def_rw("add_special", &GenerateOptions::add_special,
           "generate(): BOS (and the vocabulary's other added tokens) before the prompt.");
  g.def_rw("parse_special", &GenerateOptions::parse_special,
           "generate(): control-token texts in the prompt become control tokens.");

  nb::class_<ChatOptions, GenerateOptions> c(m, "ChatOptions", "A chat reply's options (cera::ChatOptions).");
  c.def(nb::init<>());
  c.def_rw("template_kwargs_json", &ChatOptions::template_kwargs_json,
           "Extra variables for the chat template as a JSON object; '' for none.");
}

void bind_embed_options(nb::module_& m) {
  nb::class_<EmbedOptions> e(m, "EmbedOptions", "How embeddings are made (cera::EmbedOptions).");
  e.def(nb::init<>());
  e.def_prop_rw(
      "pooling",
      [](const EmbedOptions& o) -> std::optional<std::string> {
        if (o.pooling == Pooling::kModelDefault) return std::nullopt;
        return name_of(kPoolings, o.pooling);
      },
      [](EmbedOptions& o, std::optional<std::string_view> v) {
        o.pooling = v ? parse("pooling", kPoolings, *v) : Pooling::kModelDefault;
      },
      "'none' (every token's vector), 'mean', 'cls', 'last'; None: the model's default.");
  e.def_rw("normalize", &EmbedOptions::normalize, "L2 norm 1 for each vector.");
}

}  // namespace

const char* pooling_name(Pooling p) { return p == Pooling::kModelDefault ? "default" : name_of(kPoolings, p); }

void bind_options(nb::module_& m) {
  bind_engine_config(m);
  bind_sampling(m);
  bind_generate_options(m);
  bind_embed_options(m);

  nb::class_<ChatMessage> msg(m, "ChatMessage", "One turn of a chat.");
  msg.def(nb::init<>());
  msg.def(
      "__init__", [](ChatMessage* self, std::string role, std::string content) {
        new (self) ChatMessage{.role = std::move(role), .content = std::move(content)};
      },
      nb::arg("role"), nb::arg("content"));
  msg.def_rw("role", &ChatMessage::role, "'system', 'user', 'assistant' or 'tool'.");
  msg.def_rw("content", &ChatMessage::content);
  msg.def("__repr__", [](const ChatMessage& c) {
    return nb::str("ChatMessage(role={!r}, content={!r})").format(c.role, c.content);
  });
}

}  // namespace cera::python
