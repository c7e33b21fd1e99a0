// cera's C++ facade: load a GGUF model, generate text (whole or streamed), chat through the
// model's template, tokenize, embed. The only C++ header an application includes: it names no
// type of cera's internals, so they can change without breaking a program built on it (the C ABI,
// cera.h, and the Python module are built on this facade too).
//
// Every call that can fail returns Expected<T>: a value or an Error whose message names the input,
// the limit and what to change. Nothing here throws, except std::bad_alloc.
//
// Threads: an Engine may be used from several threads at once. Generations run in the engine's
// own loop (one thread per engine, batching every request in flight); callbacks run on that
// thread and must return quickly.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace cera {

// Why a call failed (the C ABI's cera_status has the same values).
enum class ErrorKind : int {
  kInvalidArgument = 1,  // something the caller passed is malformed or out of its range
  kNotFound = 2,         // a file, key or tensor that does not exist
  kCorrupt = 3,          // a file that breaks its format's rules
  kUnsupported = 4,      // well-formed, but not something cera handles
  kIo = 5,               // the operating system refused
  kOutOfRange = 6,       // a size beyond a limit (a prompt longer than the context)
  kCancelled = 7,
  kUnavailable = 8,      // cannot be done now (a full queue, an engine shutting down)
  kInternal = 9,
};
const char* error_kind_name(ErrorKind kind);  // "invalid argument", ...

struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
};

// A value or the Error that explains why there is none.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT
  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Success without a value.
struct Done {};

// Where the model runs (named so beside cera's internal Device, which has no kAuto).
enum class DeviceChoice { kAuto, kCpu, kCuda };  // kAuto: CUDA when a GPU is there, else the CPU
enum class KvType { kAuto, kF32, kF16 };   // element type of the KV cache

// How an embedding is made of a text's token vectors.
enum class Pooling {
  kModelDefault,  // the file's pooling_type; else kMean for encoders, kLast for decoders
  kNone,          // every token's vector
  kMean,
  kCls,           // the first token's
  kLast,          // the last token's
};

struct EngineConfig {
  std::string model_path;  // a GGUF file
  DeviceChoice device = DeviceChoice::kAuto;
  // Tokens per request (prompt + output). 0: the model's training context, at most 4096.
  int32_t n_ctx = 0;
  int32_t n_threads = 0;         // CPU threads; 0: every core this process may use
  int32_t max_parallel = 4;      // requests generating at once; more wait in a queue
  int32_t max_batch_tokens = 512;  // tokens per forward: prompt chunks; the longest text embed() takes
  KvType kv_type = KvType::kAuto;
  // Tensor parallelism: the model split over this many ranks (CUDA: GPUs 0..N-1 through NCCL;
  // CPU: backends sharing n_threads), each holding 1/N of the weights and KV cache; 1 to 8.
  int32_t tensor_parallel = 1;
  // Bytes of weights loaded so far and in all (from the loading thread).
  std::function<void(uint64_t done, uint64_t total)> on_load_progress;
};

struct ModelInfo {
  std::string architecture;  // general.architecture: "llama", "qwen3", "bert", ...
  std::string name;          // general.name, or the file's stem
  std::string device;        // the backend: "cpu (avx2, 2 threads)", "cuda (NVIDIA H200)"
  int32_t n_vocab = 0;
  int32_t n_embd = 0;        // width of embed()'s vectors
  int32_t n_ctx_train = 0;
  int32_t n_ctx = 0;         // tokens per request here (EngineConfig::n_ctx resolved); 0: no generation
  bool generates = false;    // false: an encoder (bert) that only embeds
  bool has_chat_template = false;
  Pooling default_pooling = Pooling::kModelDefault;  // resolved: never kModelDefault
};

// The sampling chain, as `cera run` applies it: penalties, top-k, top-p, min-p, temperature.
struct SamplingOptions {
  float temperature = 0.8f;  // 0: greedy
  int32_t top_k = 40;        // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;
  int32_t penalty_last_n = 64;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  std::optional<uint64_t> seed;  // the same seed, prompt and options give the same text; none: random
};

// Structured output: the reply is constrained to a grammar.
enum class ConstraintKind {
  kNone,
  kGbnf,        // `source` is a GBNF grammar (llama.cpp's dialect), root rule "root"
  kJsonSchema,  // `source` is a JSON Schema
  kJsonObject,  // any JSON object (`source` unused)
};
struct Constraint {
  ConstraintKind kind = ConstraintKind::kNone;
  std::string source;
};

// Why a generation ended.
enum class FinishReason {
  kEndOfGeneration,  // the model's end token (or the grammar's end)
  kMaxTokens,
  kStopString,       // the text ends before the stop string
  kCancelled,
  kContextFull,      // prompt + output reached n_ctx
};
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "stop string", "cancelled", "context full"

// Called with each piece of text as it becomes final (whole UTF-8 characters, never past a stop
// string), on the engine's thread.
using TextCallback = std::function<void(std::string_view)>;

struct GenerateOptions {
  int32_t max_tokens = 256;  // >= 0
  SamplingOptions sampling;
  std::vector<std::string> stop;  // the reply ends before any of these
  Constraint constraint;
  TextCallback on_text;  // optional
  // generate(): BOS (and the vocabulary's other added tokens) before the prompt; control-token
  // texts in the prompt ("<|im_start|>") become control tokens. Unused by chat().
  bool add_special = true;
  bool parse_special = true;
};

struct Completion {
  std::string text;
  FinishReason finish_reason = FinishReason::kMaxTokens;
  std::vector<int32_t> tokens;  // generated ids, without a final end token
  int32_t n_prompt_tokens = 0;
  double seconds_to_first_token = 0;  // queueing and the prompt
  double seconds_generating = 0;      // from the first token to the end
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

struct ChatOptions : GenerateOptions {
  // Extra variables for the template as a JSON object ("{\"enable_thinking\": false}"); "" for none.
  std::string template_kwargs_json;
};

struct EmbedOptions {
  Pooling pooling = Pooling::kModelDefault;
  bool normalize = true;  // L2 norm 1 for each vector
};

// One text's embedding: [n_embd] floats, or [n_embd * n_tokens] (token-major) for Pooling::kNone.
struct Embedding {
  std::vector<float> values;
  int32_t n_tokens = 0;
};

// A generation in flight (Engine::start, Engine::start_chat). Its text can be pulled in pieces
// (next) or left to GenerateOptions::on_text; cancel() from any thread. Destroying it cancels the
// generation if it has not finished.
class Stream {
 public:
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  struct Chunk {
    std::string text;   // what arrived since the last next() (may be empty on a timeout)
    bool done = false;  // the generation has ended and all its text has been returned
  };
  // Waits at most `timeout` for text (a caller that must notice Ctrl-C polls with a short one).
  Chunk next(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  void cancel();
  // Waits for the end. The result's text is the whole reply (also what next() returned).
  Expected<Completion> result();

  struct State;  // opaque: defined inside the library

 private:
  friend class Engine;
  explicit Stream(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> load(const EngineConfig& config);
  ~Engine();  // cancels what is still generating
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelInfo& info() const;

  // Completes `prompt` (raw text, no template). Blocks until the end.
  Expected<Completion> generate(std::string_view prompt, const GenerateOptions& options = {});
  Expected<std::unique_ptr<Stream>> start(std::string_view prompt, const GenerateOptions& options = {});
  // Renders `messages` with the model's chat template (the assistant's turn next) and generates.
  Expected<Completion> chat(const std::vector<ChatMessage>& messages, const ChatOptions& options = {});
  Expected<std::unique_ptr<Stream>> start_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options = {});
  // The prompt chat() evaluates for these messages.
  Expected<std::string> render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                                    std::string_view template_kwargs_json = {}) const;

  Expected<std::vector<int32_t>> tokenize(std::string_view text, bool add_special = true,
                                          bool parse_special = false) const;
  // Ids outside the vocabulary are an error naming the first one.
  Expected<std::string> detokenize(const std::vector<int32_t>& tokens, bool render_special = false) const;

  // One embedding per text, in order; a decoder model's embeddings run between its generation
  // steps. Errors name the text (its index) and the limit (an empty text, one longer than
  // max_batch_tokens).
  Expected<std::vector<Embedding>> embed(const std::vector<std::string>& texts, const EmbedOptions& options = {});

  struct Impl;  // opaque: defined inside the library

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cera
