// A model's output text in OpenAI's shape: content, reasoning (Qwen3's <think>) and tool calls,
// for the tool-call syntaxes of the chat-template families cera ships; and the GBNF grammar that
// constrains generation to well-formed calls of the offered tools.
//
// The one decision that is not obvious: a call is reported only once its whole text is known
// to be well-formed (one delta holding id, name and the complete arguments), never piecewise.
// A call that turns out malformed then stays content, byte for byte, and no client ever saw
// half of it as a call. Text that merely begins like a marker is held back until it is decided.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/grammar/json_schema.h"

namespace cera::runtime::chat {

// How a family writes tool calls into its output:
//   kHermes  (Qwen 2.5, Qwen 3):  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//                                 one block per call, blocks separated by "\n".
//   kLlama3  (Llama 3.1, 3.2):    {"name": "f", "parameters": {...}} as the whole output, no
//                                 marker (3.1 may prefix <|python_tag|>); several calls are
//                                 separated by ";" (the templates render only one).
//   kLfm2    (LFM2, LFM2.5):      <|tool_call_start|>[f(a=1, b="x"), g()]<|tool_call_end|>, Python
//                                 keyword calls with Python literals.
//   kMistral (Mistral v0.3/Nemo): [TOOL_CALLS][{"name": "f", "arguments": {...},
//                                 "id": "a1B2c3D4e"}], the model's own 9-alphanumeric ids.
//   kGranite (Granite 3.x):       <|tool_call|>[{"name": "f", "arguments": {...}}]
enum class ToolCallFormat : uint8_t { kNone, kHermes, kLlama3, kLfm2, kMistral, kGranite };

// The family of a chat template, from marker texts in its source; kNone when it renders no tool
// calls that cera knows (SmolLM2, Gemma).
ToolCallFormat tool_call_format_of(std::string_view chat_template_source);
const char* tool_call_format_name(ToolCallFormat format);  // "hermes", "llama3", ...

// --- parsing --------------------------------------------------------------------------------

// Makes OpenAI-style call ids ("call_" + 24 alphanumerics) from a 64-bit seed and a counter:
// deterministic for a given seed. The server seeds it per request.
class ToolCallIds {
 public:
  explicit ToolCallIds(uint64_t seed) : state_(seed) {}
  std::string next();

 private:
  uint64_t state_;
};

struct OutputParserOptions {
  ToolCallFormat format = ToolCallFormat::kNone;
  bool tools = false;      // false: no text is ever a call (all content)
  bool reasoning = false;  // parse <think>...</think> at the start of the output as reasoning
  // The prompt ended inside "<think>": the output starts as reasoning.
  bool prompt_opened_think = false;
  uint64_t id_seed = 0;  // seed of ToolCallIds for calls that carry no id in the text
};

// One piece of output. Exactly one of the three kinds per delta.
struct OutputDelta {
  enum class Kind : uint8_t { kContent, kReasoning, kToolCall };
  Kind kind = Kind::kContent;
  std::string text;  // content or reasoning fragment; for kToolCall the arguments (a JSON object)
  int32_t tool_index = -1;  // kToolCall: 0, 1, ... in order of appearance
  std::string id;           // kToolCall: the call's id
  std::string name;         // kToolCall: the function's name
};

namespace tool_call {
// Internal to OutputParser: where the JSON object or array that starts at s[0] ends, in a text
// that grows between calls: each call scans only the bytes not seen before (strings and
// escapes are skipped).
// Returns the index just past the closing bracket, or npos while the value is still open.
// Precondition: s[0] is '{' or '[' and earlier calls saw prefixes of the same `s`.
class JsonEnd {
 public:
  size_t scan(std::string_view s);

 private:
  size_t pos_ = 0;
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
};
}  // namespace tool_call

// Splits streamed output text into deltas.
//
// Reasoning (options.reasoning): the output is reasoning from a leading "<think>" (or from the
// start when prompt_opened_think) up to "</think>". Newlines right after "<think>" and right
// before "</think>" are not reasoning, and newlines right after "</think>" are not content:
// exactly how the Qwen3 template itself splits a past message (lstrip/rstrip of "\n"), so a
// parsed turn renders back to the same text. (llama.cpp strips all whitespace there, with
// string_strip and consume_spaces; vLLM's qwen3 parser strips nothing.) An unclosed "<think>"
// is reasoning up to the end.
//
// Tool calls (options.tools and a format other than kNone): see ToolCallFormat for each text.
// Whitespace between content and a call, between calls and after the last call is dropped.
// A call block that does not parse (bad JSON, no name, arguments not an object, positional
// pythonic arguments, unterminated at finish) stays content verbatim and finish() reports the
// first such block. Not thread-safe; one per output stream.

class OutputParser {
 public:
  explicit OutputParser(const OutputParserOptions& options);

  // Appends the deltas that `text` decides to `out`; bytes that may still be the start of a
  // marker are held. Every byte pushed ends up in exactly one delta or is a marker/separator.
  void push(std::string_view text, std::vector<OutputDelta>& out);
  // Flushes what is held. Returns invalid_argument naming the first malformed call (its text
  // was emitted as content), ok otherwise. push() must not be called afterwards.
  Status finish(std::vector<OutputDelta>& out);

 private:
  enum class Mode : uint8_t { kStart, kReasoning, kContent, kCall, kAfterCall };
  // Each step consumes from buf_ what it can decide; true when the mode changed and another
  // step may make progress.
  bool step_start(bool at_end);
  bool step_reasoning(std::vector<OutputDelta>& out, bool at_end);
  bool step_content(std::vector<OutputDelta>& out, bool at_end);
  bool step_llama_start(bool at_end);
  bool step_call(std::vector<OutputDelta>& out, bool at_end);
  bool step_after_call();
  void run(std::vector<OutputDelta>& out, bool at_end);
  bool calls_enabled() const;
  void emit(OutputDelta::Kind kind, std::string_view text, std::vector<OutputDelta>& out);
  void emit_reasoning(std::string_view text, std::vector<OutputDelta>& out);
  void emit_content(std::string_view text, std::vector<OutputDelta>& out);
  // Reports the calls in `block`, or emits call_prefix_ + block + end as content and records
  // the error; returns whether the block held calls.
  bool finish_block(std::string_view block, std::string_view end, bool terminated,
                    std::vector<OutputDelta>& out);

  OutputParserOptions opt_;
  ToolCallIds ids_;
  Mode mode_ = Mode::kStart;
  std::string buf_;                 // undecided text
  std::string held_ws_;             // content whitespace that may precede a call
  std::string call_prefix_;         // held whitespace and the marker of the open call block
  bool reasoning_started_ = false;  // a reasoning byte other than leading newlines was emitted
  std::string reasoning_nl_;        // newlines inside reasoning that may precede "</think>"
  bool after_think_ = false;        // newlines that follow "</think>" are dropped
  bool llama_open_ = true;          // kLlama3: a call may still start here
  size_t searched_ = 0;             // kCall: bytes of buf_ already searched for the end marker
  tool_call::JsonEnd json_end_;     // kCall: the end of the block's JSON value, scanned so far
  int32_t calls_ = 0;
  int32_t blocks_ = 0;
  size_t merge_from_ = 0;  // deltas of this push/finish start here; earlier ones are the caller's
  Status first_error_;
};

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object text
};

struct ParsedOutput {
  std::string content;
  std::string reasoning;
  std::vector<ParsedToolCall> tool_calls;
  Status status;  // finish()'s
};

// push(text) + finish() with the deltas joined.
ParsedOutput parse_output(const OutputParserOptions& options, std::string_view text);

// --- constraining ---------------------------------------------------------------------------

struct ToolSpec {
  std::string name;
  std::string parameters;  // the function's JSON Schema (an object schema) as JSON text; "" = {}
};

struct ToolConstraint {
  std::optional<std::string> name;  // tool_choice naming one function: only that one
  bool parallel = false;            // parallel_tool_calls: one or more calls, else exactly one
  grammar::JsonSchemaOptions json = {.whitespace = grammar::JsonWhitespace::kFlexible};
};

// A GBNF grammar (root rule "root") whose sentences are exactly the well-formed calls, in the
// family's syntax, of `tools` (or only the named one), each call's arguments constrained by
// its tool's schema through grammar::json_schema_to_gbnf. The sentences start WITH the
// family's trigger text (tool_call_trigger) and contain nothing before it (kLlama3: an optional
// "<|python_tag|>" may precede the "{"). Whitespace as constraint.json says. For kLfm2 the
// arguments are Python keyword arguments: top-level properties are listed by name with values
// of their schema's type (strings, enums of strings, integers, numbers, booleans, None);
// values of other schemas are any Python literal. kNone, an unknown name, a tool list without
// the named tool or a schema the converter refuses is an error naming it.
Result<std::string> tool_call_gbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                   const ToolConstraint& constraint);

// The text at which a lazily constrained "auto" generation switches into tool_call_gbnf's
// grammar; the grammar then starts AT the trigger: feed the trigger's bytes to the matcher
// first. kHermes "<tool_call>", kLfm2 "<|tool_call_start|>", kMistral "[TOOL_CALLS]", kGranite
// "<|tool_call|>". kLlama3 has no marker: its trigger "{" counts only as the first
// non-whitespace text of the output (a "{" later in prose is not a call), see
// tool_call_trigger_only_at_start. kNone: "".
std::string_view tool_call_trigger(ToolCallFormat format);
bool tool_call_trigger_only_at_start(ToolCallFormat format);

}  // namespace cera::runtime::chat
