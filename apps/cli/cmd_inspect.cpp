// `cera inspect FILE [--json]`: what is in a GGUF file: header, metadata (long arrays
// summarised), tensors, totals by type and the parameter count.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "format/gguf.h"
#include "output.h"

namespace cera::cli {
namespace {

using format::GgufArray;
using format::GgufFile;
using format::GgufType;
using format::GgufValue;

constexpr uint64_t kArrayHead = 6;     // elements shown of a long array
constexpr size_t kStringPreview = 60;  // characters shown of a long string

std::string escape(std::string_view s, size_t limit) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const unsigned char c = s[i];
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else if (c < 0x20) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (s.size() > limit) out += "...";
  return out;
}

std::string scalar_text(const GgufValue& v) {
  if (const std::string* s = v.string()) return "\"" + escape(*s, kStringPreview) + "\"";
  if (const bool* b = std::get_if<bool>(&v.v)) return *b ? "true" : "false";
  if (auto i = v.as_int()) return std::to_string(*i);
  if (const uint64_t* u = std::get_if<uint64_t>(&v.v)) return std::to_string(*u);
  if (auto d = v.as_double()) return fmt::format("{:g}", *d);
  return "?";
}

std::string value_text(const GgufValue& v) {
  const GgufArray* a = v.array();
  if (a == nullptr) return scalar_text(v);
  std::string out = fmt::format("[{} x {}]", format::gguf_type_name(a->element_type), a->size());
  const uint64_t shown = a->size() <= kArrayHead + 2 ? a->size() : kArrayHead;
  for (uint64_t i = 0; i < shown; ++i) out += (i ? ", " : " ") + value_text(a->at(i));
  if (shown < a->size()) out += ", ...";
  return out;
}

nlohmann::json value_json(const GgufValue& v) {
  const GgufArray* a = v.array();
  if (a == nullptr) {
    if (const std::string* s = v.string()) return *s;
    if (const bool* b = std::get_if<bool>(&v.v)) return *b;
    if (const uint64_t* u = std::get_if<uint64_t>(&v.v)) return *u;
    if (auto i = v.as_int()) return *i;
    return *v.as_double();
  }
  if (a->size() <= 16) {
    nlohmann::json arr = nlohmann::json::array();
    for (uint64_t i = 0; i < a->size(); ++i) arr.push_back(value_json(a->at(i)));
    return arr;
  }
  nlohmann::json head = nlohmann::json::array();
  for (uint64_t i = 0; i < kArrayHead; ++i) head.push_back(value_json(a->at(i)));
  return {{"array_of", format::gguf_type_name(a->element_type)}, {"length", a->size()}, {"head", head}};
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string human_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < (1ull << 20)) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (b < (1ull << 30)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

std::string human_count(uint64_t n) {
  if (n < 1000) return std::to_string(n);
  if (n < 1000000) return fmt::format("{:.1f} K", n / 1e3);
  if (n < 1000000000) return fmt::format("{:.1f} M", n / 1e6);
  return fmt::format("{:.2f} B", n / 1e9);
}

struct TypeTotal {
  uint64_t tensors = 0, params = 0, bytes = 0;
};

void print_text(const std::string& path, const GgufFile& f) {
  stdout_print("{}\n", path);
  stdout_print("GGUF v{}, {} metadata keys, {} tensors, alignment {}, data at byte {}, file {}\n\n",
             f.version(), f.metadata().size(), f.tensors().size(), f.alignment(), f.data_offset(),
             human_bytes(f.file_size()));
  size_t key_width = 3;
  for (const auto& kv : f.metadata()) key_width = std::max(key_width, kv.key.size());
  stdout_print("Metadata\n");
  for (const auto& kv : f.metadata()) {
    stdout_print("  {:<{}}  {:<7}  {}\n", kv.key, key_width, format::gguf_type_name(kv.value.type()),
               value_text(kv.value));
  }
  std::map<DType, TypeTotal> totals;
  uint64_t params = 0;
  if (!f.tensors().empty()) {
    size_t name_width = 4;
    for (const auto& t : f.tensors()) name_width = std::max(name_width, t.name.size());
    stdout_print("\nTensors\n  {:<{}}  {:<7}  {:<22}  {:>12}\n", "name", name_width, "type", "shape", "bytes");
    for (const auto& t : f.tensors()) {
      stdout_print("  {:<{}}  {:<7}  {:<22}  {:>12}\n", t.name, name_width, dtype_name(t.dtype),
                 shape_text(t.shape), t.n_bytes);
      TypeTotal& tt = totals[t.dtype];
      ++tt.tensors;
      tt.params += t.n_elements();
      tt.bytes += t.n_bytes;
      params += t.n_elements();
    }
    stdout_print("\nTotals by type\n  {:<7}  {:>7}  {:>14}  {:>11}  {:>9}\n", "type", "tensors", "parameters",
               "bytes", "bits/w");
    uint64_t bytes = 0;
    for (const auto& [dtype, tt] : totals) {
      stdout_print("  {:<7}  {:>7}  {:>14}  {:>11}  {:>9.3f}\n", dtype_name(dtype), tt.tensors, tt.params,
                 human_bytes(tt.bytes), 8.0 * tt.bytes / tt.params);
      bytes += tt.bytes;
    }
    stdout_print("  {:<7}  {:>7}  {:>14}  {:>11}  {:>9.3f}\n", "all", f.tensors().size(), params,
               human_bytes(bytes), 8.0 * bytes / params);
  }
  stdout_print("\nParameters: {} ({})\n", human_count(params), params);
}

void print_json(const std::string& path, const GgufFile& f) {
  nlohmann::json j;
  j["file"] = path;
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["file_size"] = f.file_size();
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& kv : f.metadata()) meta[kv.key] = value_json(kv.value);
  j["metadata"] = meta;
  nlohmann::json tensors = nlohmann::json::array();
  std::map<std::string, TypeTotal> totals;
  uint64_t params = 0;
  for (const auto& t : f.tensors()) {
    tensors.push_back({{"name", t.name}, {"type", dtype_name(t.dtype)}, {"shape", t.shape},
                       {"offset", t.offset}, {"bytes", t.n_bytes}});
    TypeTotal& tt = totals[std::string(dtype_name(t.dtype))];
    ++tt.tensors;
    tt.params += t.n_elements();
    tt.bytes += t.n_bytes;
    params += t.n_elements();
  }
  j["tensors"] = tensors;
  nlohmann::json by_type = nlohmann::json::object();
  for (const auto& [name, tt] : totals) {
    by_type[name] = {{"tensors", tt.tensors}, {"parameters", tt.params}, {"bytes", tt.bytes}};
  }
  j["totals_by_type"] = by_type;
  j["parameters"] = params;
  // GGUF strings are meant to be UTF-8 but nothing enforces it: error_handler_t::replace writes
  // each invalid byte as U+FFFD (the JSON stays valid; the default handler throws).
  stdout_print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show the metadata and tensors of a GGUF file");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("file", *path, "GGUF file")->required();
  cmd->add_flag("--json", *json, "Print JSON instead of tables");
  cmd->callback([path, json] {
    auto file = GgufFile::open(*path);
    if (!file.ok()) {
      std::fprintf(stderr, "cera inspect: %s\n", file.status().to_string().c_str());
      throw CLI::RuntimeError(1);
    }
    if (*json) print_json(*path, *file);
    else print_text(*path, *file);
    fail_if_stdout_failed();  // main's final flush catches what is still buffered
  });
}

}  // namespace cera::cli
