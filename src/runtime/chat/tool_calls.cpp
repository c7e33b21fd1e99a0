// OutputParser: a small state machine over the undecided tail of the output (buf_). Each mode
// consumes what it can decide and keeps only a suffix that may still become a marker, so held
// bytes are bounded by the longest marker outside call blocks; inside a block everything is
// held until the block ends, because a block that fails to parse must come out as content.
#include "runtime/chat/tool_calls.h"

#include "core/hash.h"
#include "runtime/chat/tool_call_parts.h"

namespace cera::runtime::chat {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool contains(std::string_view s, std::string_view what) {
  return s.find(what) != std::string_view::npos;
}

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (marker.starts_with(s.substr(s.size() - n))) return n;
  return 0;
}

// The marker a call block starts with: the lazy grammar's trigger, except Llama 3's "{", which
// has no marker (its calls are found at the start of the output instead).
std::string_view start_marker(ToolCallFormat f) {
  return f == ToolCallFormat::kLlama3 ? std::string_view() : tool_call_trigger(f);
}

// Hermes and LFM2 close their blocks with a marker; the others end with their JSON value.
std::string_view end_marker(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
      return "</tool_call>";
    case ToolCallFormat::kLfm2:
      return "<|tool_call_end|>";
    default:
      return "";
  }
}

}  // namespace

ToolCallFormat tool_call_format_of(std::string_view src) {
  // Most specific markers first: LFM2's and Granite's contain "tool_call" too.
  if (contains(src, "<|tool_call_start|>") || contains(src, "<|tool_list_start|>") ||
      contains(src, "List of tools: ["))  // LFM2.5 lists tools without the list markers
    return ToolCallFormat::kLfm2;
  if (contains(src, "[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (contains(src, "<|tool_call|>")) return ToolCallFormat::kGranite;
  if (contains(src, "<tool_call>")) return ToolCallFormat::kHermes;
  if (contains(src, "<|python_tag|>") ||
      (contains(src, "<|start_header_id|>") && contains(src, "\"parameters\": ")))
    return ToolCallFormat::kLlama3;
  return ToolCallFormat::kNone;
}

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kNone:
      return "none";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3:
      return "llama3";
    case ToolCallFormat::kLfm2:
      return "lfm2";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kGranite:
      return "granite";
  }
  return "?";
}

std::string ToolCallIds::next() {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int part = 0; part < 3; ++part) {  // 8 characters per 64-bit draw (62^8 < 2^48)
    state_ += 0x9e3779b97f4a7c15ull;
    uint64_t x = mix64(state_);
    for (int i = 0; i < 8; ++i, x /= 62) id += kAlphabet[x % 62];
  }
  return id;
}

OutputParser::OutputParser(const OutputParserOptions& options)
    : opt_(options), ids_(options.id_seed) {}

bool OutputParser::calls_enabled() const {
  return opt_.tools && opt_.format != ToolCallFormat::kNone;
}

void OutputParser::push(std::string_view text, std::vector<OutputDelta>& out) {
  buf_.append(text);
  run(out, /*at_end=*/false);
}

Status OutputParser::finish(std::vector<OutputDelta>& out) {
  run(out, /*at_end=*/true);
  return first_error_;
}

void OutputParser::run(std::vector<OutputDelta>& out, bool at_end) {
  merge_from_ = out.size();
  for (bool again = true; again;) {
    switch (mode_) {
      case Mode::kStart:
        again = step_start(at_end);
        break;
      case Mode::kReasoning:
        again = step_reasoning(out, at_end);
        break;
      case Mode::kContent:
        again = step_content(out, at_end);
        break;
      case Mode::kCall:
        again = step_call(out, at_end);
        break;
      case Mode::kAfterCall:
        again = step_after_call();
        break;
    }
  }
}

void OutputParser::emit(OutputDelta::Kind kind, std::string_view text,
                        std::vector<OutputDelta>& out) {
  if (text.empty()) return;
  if (out.size() > merge_from_ && out.back().kind == kind && kind != OutputDelta::Kind::kToolCall) {
    out.back().text.append(text);  // within one push, runs of a kind become one delta
    return;
  }
  out.push_back({.kind = kind, .text = std::string(text)});
}

bool OutputParser::step_start(bool at_end) {
  if (opt_.reasoning && opt_.prompt_opened_think) {
    mode_ = Mode::kReasoning;
    return true;
  }
  if (opt_.reasoning) {
    if (std::string_view(buf_).starts_with(kThinkOpen)) {
      buf_.erase(0, kThinkOpen.size());
      mode_ = Mode::kReasoning;
      return true;
    }
    if (!at_end && kThinkOpen.starts_with(buf_)) return false;
  }
  mode_ = Mode::kContent;
  return true;
}

void OutputParser::emit_reasoning(std::string_view text, std::vector<OutputDelta>& out) {
  std::string pending;
  for (char c : text) {
    if (c == '\n') {
      if (reasoning_started_) reasoning_nl_ += c;  // leading newlines are dropped
      continue;
    }
    pending += reasoning_nl_;
    reasoning_nl_.clear();
    pending += c;
    reasoning_started_ = true;
  }
  emit(OutputDelta::Kind::kReasoning, pending, out);
}

bool OutputParser::step_reasoning(std::vector<OutputDelta>& out, bool at_end) {
  if (size_t p = buf_.find(kThinkClose); p != std::string::npos) {
    emit_reasoning(std::string_view(buf_).substr(0, p), out);
    reasoning_nl_.clear();  // newlines before "</think>" are not reasoning
    buf_.erase(0, p + kThinkClose.size());
    mode_ = Mode::kContent;
    after_think_ = true;
    return true;
  }
  const size_t take = buf_.size() - (at_end ? 0 : partial_suffix(buf_, kThinkClose));
  emit_reasoning(std::string_view(buf_).substr(0, take), out);
  buf_.erase(0, take);
  if (at_end) {  // unclosed: its trailing newlines are reasoning after all
    emit(OutputDelta::Kind::kReasoning, reasoning_nl_, out);
    reasoning_nl_.clear();
  }
  return false;
}

void OutputParser::emit_content(std::string_view text, std::vector<OutputDelta>& out) {
  const size_t last = text.find_last_not_of(" \t\r\n");
  if (last == std::string_view::npos) {
    held_ws_.append(text);
    return;
  }
  emit(OutputDelta::Kind::kContent, held_ws_, out);
  emit(OutputDelta::Kind::kContent, text.substr(0, last + 1), out);
  held_ws_.assign(text.substr(last + 1));
}

bool OutputParser::step_content(std::vector<OutputDelta>& out, bool at_end) {
  if (after_think_) {
    const size_t n = std::min(buf_.find_first_not_of('\n'), buf_.size());
    buf_.erase(0, n);
    if (buf_.empty()) return false;
    after_think_ = false;
  }
  const bool llama = opt_.format == ToolCallFormat::kLlama3;
  if (calls_enabled() && llama && llama_open_) return step_llama_start(at_end);
  if (!calls_enabled() || llama) {
    emit(OutputDelta::Kind::kContent, held_ws_, out);
    held_ws_.clear();
    emit(OutputDelta::Kind::kContent, buf_, out);
    buf_.clear();
    return false;
  }
  const std::string_view marker = start_marker(opt_.format);
  if (size_t p = buf_.find(marker); p != std::string::npos) {
    emit_content(std::string_view(buf_).substr(0, p), out);
    call_prefix_ = held_ws_ + std::string(marker);
    held_ws_.clear();
    buf_.erase(0, p + marker.size());
    mode_ = Mode::kCall;
    return true;
  }
  const size_t take = buf_.size() - (at_end ? 0 : partial_suffix(buf_, marker));
  emit_content(std::string_view(buf_).substr(0, take), out);
  buf_.erase(0, take);
  if (at_end) {
    emit(OutputDelta::Kind::kContent, held_ws_, out);
    held_ws_.clear();
  }
  return false;
}

// Llama 3 has no marker: a call is a JSON object (or <|python_tag|> and one) as the first
// non-whitespace text of the output, or after a previous call.
bool OutputParser::step_llama_start(bool at_end) {
  const size_t ws = std::min(buf_.find_first_not_of(" \t\r\n"), buf_.size());
  if (ws == buf_.size() && !at_end) return false;
  const std::string_view rest = std::string_view(buf_).substr(ws);
  size_t prefix = std::string::npos;
  if (rest.starts_with('{'))
    prefix = ws;
  else if (rest.starts_with(kPythonTag))
    prefix = ws + kPythonTag.size();
  else if (!at_end && kPythonTag.starts_with(rest))
    return false;
  if (prefix != std::string::npos) {
    call_prefix_ = held_ws_ + buf_.substr(0, prefix);
    held_ws_.clear();
    buf_.erase(0, prefix);
    mode_ = Mode::kCall;
  }
  llama_open_ = false;
  return true;
}

bool OutputParser::step_call(std::vector<OutputDelta>& out, bool at_end) {
  if (const std::string_view end = end_marker(opt_.format); !end.empty()) {
    // Search only where the marker could end in bytes not searched before.
    const size_t p = buf_.find(end, searched_ >= end.size() ? searched_ - end.size() + 1 : 0);
    searched_ = buf_.size();
    if (p == std::string::npos && !at_end) return false;
    const bool terminated = p != std::string::npos;
    const bool ok = finish_block(std::string_view(buf_).substr(0, terminated ? p : buf_.size()),
                                 terminated ? end : "", terminated, out);
    buf_.erase(0, terminated ? p + end.size() : buf_.size());
    mode_ = ok ? Mode::kAfterCall : Mode::kContent;
    return true;
  }
  // The block is the JSON value after the marker (Mistral, Granite: a list; Llama 3: an object).
  const size_t ws = std::min(buf_.find_first_not_of(" \t\r\n"), buf_.size());
  if (ws == buf_.size() && !at_end) return false;
  const char c = ws < buf_.size() ? buf_[ws] : '\0';
  const bool opens = c == '{' || (c == '[' && opt_.format != ToolCallFormat::kLlama3);
  const size_t e = opens ? json_end_.scan(std::string_view(buf_).substr(ws)) : std::string::npos;
  if (opens && e == std::string::npos && !at_end) return false;
  const size_t len = e == std::string::npos ? buf_.size() : ws + e;
  const bool ok =
      finish_block(std::string_view(buf_).substr(0, len), "", e != std::string::npos, out);
  buf_.erase(0, len);
  mode_ = ok ? Mode::kAfterCall : Mode::kContent;
  return true;
}

bool OutputParser::finish_block(std::string_view block, std::string_view end, bool terminated,
                                std::vector<OutputDelta>& out) {
  ++blocks_;
  searched_ = 0;
  json_end_ = {};
  auto calls = tool_call::parse_block(opt_.format, block);
  if (calls.ok()) {
    for (tool_call::Call& c : *calls) {
      out.push_back({.kind = OutputDelta::Kind::kToolCall,
                     .text = std::move(c.arguments),
                     .tool_index = calls_++,
                     .id = c.id.empty() ? ids_.next() : std::move(c.id),
                     .name = std::move(c.name)});
    }
    call_prefix_.clear();
    return true;
  }
  if (first_error_.ok()) {
    first_error_ =
        invalid_argument(std::string(tool_call_format_name(opt_.format)) + " tool call block " +
                         std::to_string(blocks_) + (terminated ? "" : " (unterminated)") + ": " +
                         calls.status().message() + "; its text was kept as content");
  }
  emit(OutputDelta::Kind::kContent, call_prefix_, out);
  emit(OutputDelta::Kind::kContent, block, out);
  emit(OutputDelta::Kind::kContent, end, out);
  call_prefix_.clear();
  return false;
}

bool OutputParser::step_after_call() {
  // Separators: whitespace, and ";" between Llama 3 calls.
  size_t n = 0;
  while (n < buf_.size() && (tool_call::is_space(buf_[n]) ||
                             (opt_.format == ToolCallFormat::kLlama3 && buf_[n] == ';')))
    ++n;
  buf_.erase(0, n);
  if (buf_.empty()) return false;
  mode_ = Mode::kContent;
  llama_open_ = true;
  return true;
}

ParsedOutput parse_output(const OutputParserOptions& options, std::string_view text) {
  OutputParser parser(options);
  std::vector<OutputDelta> deltas;
  parser.push(text, deltas);
  ParsedOutput out;
  out.status = parser.finish(deltas);
  for (OutputDelta& d : deltas) {
    switch (d.kind) {
      case OutputDelta::Kind::kContent:
        out.content += d.text;
        break;
      case OutputDelta::Kind::kReasoning:
        out.reasoning += d.text;
        break;
      case OutputDelta::Kind::kToolCall:
        out.tool_calls.push_back(
            {.id = std::move(d.id), .name = std::move(d.name), .arguments = std::move(d.text)});
        break;
    }
  }
  return out;
}

}  // namespace cera::runtime::chat
