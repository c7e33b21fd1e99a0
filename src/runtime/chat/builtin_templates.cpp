#include "runtime/chat/builtin_templates.h"

namespace cera::runtime::chat {
namespace {

// Gemma's turn format: BOS, the system text opening the first user turn, "assistant" spelled
// "model", each turn closed by <end_of_turn> and a newline.
constexpr std::string_view kGemma = R"JINJA({{- bos_token -}}
{%- set ns = namespace(prefix="") -%}
{%- if messages and messages[0].role == "system" -%}
    {%- set ns.prefix = messages[0].content ~ "\n\n" -%}
    {%- set turns = messages[1:] -%}
{%- else -%}
    {%- set turns = messages -%}
{%- endif -%}
{%- for m in turns -%}
    {%- if (m.role == "user") != loop.index0 is even -%}
        {{- raise_exception("Gemma turns must alternate user/model, starting with user") -}}
    {%- endif -%}
    {%- set role = "model" if m.role == "assistant" else m.role -%}
{{ "<start_of_turn>" ~ role }}
{% if loop.first %}{{ ns.prefix }}{% endif %}{{ m.content | trim }}<end_of_turn>
{% endfor -%}
{%- if add_generation_prompt -%}
{{ "<start_of_turn>model\n" }}
{%- endif -%}
)JINJA";

}  // namespace

std::optional<std::string_view> builtin_template_for_arch(std::string_view arch) {
  if (arch == "gemma3" || arch == "gemma2" || arch == "gemma") return kGemma;
  return std::nullopt;
}

}  // namespace cera::runtime::chat
