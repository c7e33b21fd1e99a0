// Hostile chat templates (issue 16): a corpus of template bombs, each of which crashed, hung or
// exhausted the host before the engine had limits, must now end with an error that names the
// limit, its value and the template position, quickly and in bounded memory. Each bomb runs in
// a child process, so that on a broken engine one case fails instead of the whole test binary;
// the child measures its own time (steady clock) and peak memory (getrusage) and, in the ASan
// build, checks for leaks.
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include "runtime/chat/chat_template.h"
#include "test_paths.h"

#if defined(__SANITIZE_ADDRESS__)
#define CERA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CERA_TEST_ASAN 1
#endif
#endif

#ifdef CERA_TEST_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace cera::runtime::chat {
namespace {

// Only hang guards: the assertions that matter are the errors. A sanitizer or Debug build runs
// the evaluator 10 to 30 times slower, and ASan keeps freed memory in quarantine.
#if defined(NDEBUG) && !defined(CERA_TEST_ASAN)
constexpr double kHangGuardSeconds = 5;
constexpr double kMaxRssGrowthMb = 400;
#else
constexpr double kHangGuardSeconds = 60;
constexpr double kMaxRssGrowthMb = 1500;
#endif
// The deepest templates run on a thread with this stack, below the main thread's 8 MB, so the
// stack bound of limits.h (max_depth) is checked with a margin: a Release build needs under
// 1 MB at the limit, the ASan Debug build under 4 MB.
#if defined(NDEBUG) && !defined(CERA_TEST_ASAN)
constexpr size_t kSmallStackBytes = size_t{2} << 20;
#else
constexpr size_t kSmallStackBytes = size_t{6} << 20;
#endif
constexpr int kKillAfterSeconds = 180;

// Runs `f` on a thread whose stack is `bytes` (a stack overflow there is a crash, as it would be
// on a server's worker thread).
void run_on_stack(size_t bytes, const std::function<void()>& f) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    (*static_cast<const std::function<void()>*>(p))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, const_cast<std::function<void()>*>(&f)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

std::string repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// "PARSE: <message>", "RENDER: <message>" or "OK: <n> bytes".
std::string parse_and_render(const std::string& source) {
  auto t = ChatTemplate::parse(source);
  if (!t.ok()) return "PARSE: " + t.status().message();
  ChatContext ctx;
  ctx.messages = Value(Array{make_message("user", "hi")});
  auto r = t->render(ctx);
  if (!r.ok()) return "RENDER: " + r.status().message();
  return "OK: " + std::to_string(r->size()) + " bytes";
}

long max_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

long current_rss_kb() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

struct Outcome {
  std::string result;  // as parse_and_render, or "THREW: ...", "DIED: signal N", "HUNG"
  double seconds = 0;
  double rss_growth_mb = 0;
};

Outcome run_isolated(const std::string& source) {
  int fds[2];
  if (pipe(fds) != 0) return {"pipe failed"};
  std::fflush(nullptr);  // or the child's copy of unwritten output would be written twice
  const pid_t pid = fork();
  if (pid < 0) return {"fork failed"};
  if (pid == 0) {
    close(fds[0]);
    const rlimit no_core{0, 0};  // a crash on a broken engine should not write gigabytes
    setrlimit(RLIMIT_CORE, &no_core);
#ifndef CERA_TEST_ASAN  // (ASan reserves terabytes of address space up front)
    // On a broken engine a runaway allocation fails here instead of swapping the host.
    rlimit as{};
    getrlimit(RLIMIT_AS, &as);
    std::ifstream statm("/proc/self/statm");
    long pages = 0;
    statm >> pages;
    as.rlim_cur = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (rlim_t{2} << 30);
    setrlimit(RLIMIT_AS, &as);
#endif
    const long rss_before = current_rss_kb();
    const auto start = std::chrono::steady_clock::now();
    std::string result;
    try {  // an exception must not unwind into gtest, which would go on running tests here
      result = parse_and_render(source);
    } catch (const std::exception& e) {
      result = std::string("THREW: ") + e.what();
    } catch (...) {
      result = "THREW";
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double growth_mb = static_cast<double>(max_rss_kb() - rss_before) / 1024;
#ifdef CERA_TEST_ASAN
    // Everything the render made is gone by now: whatever LeakSanitizer finds leaked.
    if (__lsan_do_recoverable_leak_check() != 0) result = "LEAKED: " + result;
#endif
    const std::string report =
        std::to_string(seconds) + " " + std::to_string(growth_mb) + " " + result;
    size_t done = 0;
    while (done < report.size()) {
      const ssize_t n = write(fds[1], report.data() + done, report.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);  // no atexit handlers, no gtest teardown in the child
  }
  close(fds[1]);
  std::string report;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kKillAfterSeconds);
  bool hung = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      hung = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    report.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (hung) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (hung) return {"HUNG"};
  if (WIFSIGNALED(status)) return {"DIED: signal " + std::to_string(WTERMSIG(status))};
  Outcome o;
  std::istringstream in(report);
  in >> o.seconds >> o.rss_growth_mb;
  in.get();
  std::getline(in, o.result, '\0');
  return o;
}

struct Bomb {
  std::string name;
  std::string source;
  std::string limit;  // "TemplateLimits::<field>" and its value, as the message spells them
};

// The limits' default values, spelled as the errors spell them (DefaultsAreTheDocumentedOnes
// checks the numbers against TemplateLimits).
const std::string kDepth = "the limit of 256 levels (TemplateLimits::max_depth)";
const std::string kValueBytes = "the limit of 16777216 bytes (TemplateLimits::max_value_bytes)";
const std::string kValueItems = "the limit of 1048576 items (TemplateLimits::max_value_items)";
const std::string kOutput = "the limit of 16777216 bytes (TemplateLimits::max_output_bytes)";
const std::string kIterations =
    "the limit of 1000000 iterations (TemplateLimits::max_loop_iterations)";
const std::string kSteps = "the limit of 10000000 steps (TemplateLimits::max_steps)";

std::vector<Bomb> bombs() {
  const std::string ns = "{% set ns = namespace(s='ab', l=[1, 2, 3], x=1) %}";
  const auto doubling = [&](const std::string& set) {
    return ns + "{% for i in range(64) %}" + set + "{% endfor %}{{ ns.s | length }}";
  };
  return {
      // Nesting: each overflowed the parser's or the evaluator's stack.
      {"parentheses", "{{ " + repeat("(", 10000) + "1" + repeat(")", 10000) + " }}", kDepth},
      {"nested_lists", "{{ " + repeat("[", 5000) + "1" + repeat("]", 5000) + " }}", kDepth},
      {"nested_dicts", "{{ " + repeat("{'a': ", 5000) + "1" + repeat("}", 5000) + " }}", kDepth},
      {"plus_chain", "{{ 1" + repeat(" + 1", 20000) + " }}", kDepth},
      {"concat_chain", "{{ 'a'" + repeat(" ~ 'a'", 20000) + " }}", kDepth},
      {"filter_chain", "{{ 'a'" + repeat(" | trim", 20000) + " }}", kDepth},
      {"not_chain", "{{ " + repeat("not ", 20000) + "true }}", kDepth},
      {"minus_chain", "{{ " + repeat("-", 100000) + "1 }}", kDepth},
      {"subscript_chain", "{{ 'a'" + repeat("[0]", 100000) + " }}", kDepth},
      {"nested_ifs", repeat("{% if true %}", 20000) + "x" + repeat("{% endif %}", 20000), kDepth},
      {"nested_fors", repeat("{% for a in [1] %}", 20000) + "x" + repeat("{% endfor %}", 20000),
       kDepth},
      {"recursive_macro", "{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}", kDepth},
      // Within the old 200-call limit, but each call nests 150 filters deeper.
      {"recursive_macro_nesting",
       "{% macro m(n) %}{{ m(n)" + repeat(" | string", 150) + " }}{% endmacro %}{{ m(1) }}",
       kDepth},
      {"nested_value",
       ns + "{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}", kDepth},
      // Growth: each ran out of memory (or would have, at 1e12 bytes).
      {"repetition", "{{ 'a' * 10**12 }}", kValueBytes},
      {"repetition_in_loop", doubling("{% set ns.s = ns.s * 3 %}"), kValueBytes},
      {"doubling_plus", doubling("{% set ns.s = ns.s + ns.s %}"), kValueBytes},
      {"doubling_tilde", doubling("{% set ns.s = ns.s ~ ns.s %}"), kValueBytes},
      {"doubling_join", doubling("{% set ns.s = [ns.s, ns.s] | join %}"), kValueBytes},
      {"doubling_join_method", doubling("{% set ns.s = ns.s.join([ns.s, ns.s, 'x']) %}"),
       kValueBytes},
      {"doubling_replace", doubling("{% set ns.s = ns.s.replace('a', 'aa') %}"), kValueBytes},
      {"doubling_replace_empty", doubling("{% set ns.s = ns.s | replace('', 'x') %}"), kValueBytes},
      {"doubling_block_set",
       ns + "{% for i in range(64) %}{% set t %}{{ ns.s }}{{ ns.s }}{% endset %}"
            "{% set ns.s = t %}{% endfor %}",
       kValueBytes},
      {"doubling_macro",
       ns + "{% macro twice(s) %}{{ s }}{{ s }}{% endmacro %}"
            "{% for i in range(64) %}{% set ns.s = twice(ns.s) %}{% endfor %}",
       kValueBytes},
      {"indent_width", "{{ ('a\\n' * 1000) | indent(10**9, first=true) }}", kValueBytes},
      {"indent_lines", "{{ ('\\n' * 10000000) | indent(1000, blank=true) }}", kValueBytes},
      {"tojson_indent", "{{ range(100000) | tojson(indent=100000) }}", kValueBytes},
      {"doubling_list", doubling("{% set ns.l = ns.l + ns.l %}"), kValueItems},
      {"doubling_shared_lists", doubling("{% set ns.l = [ns.l, ns.l] %}") + "{{ ns.l }}",
       kValueItems},
      {"range_1e12", "{% for i in range(10**12) %}{% endfor %}", kValueItems},
      {"split_into_parts", "{{ (' ' * 16000000).split(' ') | length }}", kValueItems},
      {"iterate_long_string", "{% for c in 'a' * 16000000 %}{% endfor %}", kValueItems},
      {"output", "{% for i in range(1000000) %}" + repeat("x", 1000) + "{% endfor %}", kOutput},
      // Time: each hung.
      {"nested_loops",
       "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
       kIterations},
      // A loop that does some work runs out of steps before it runs out of iterations.
      {"nested_loops_with_output",
       "{% for a in range(100000) %}{% for b in range(100000) %}{{ b }}{% endfor %}{% endfor %}",
       kSteps},
      {"heavy_loop_body",
       "{% for a in range(100000) %}{% for b in range(100000) %}{% set x = 1" + repeat(" + 1", 50) +
           " %}{% endfor %}{% endfor %}",
       kSteps},
      {"search_in_loop",
       "{% set s = 'a' * 10000000 %}{% set t = 'a' * 1000 ~ 'b' %}"
       "{% for i in range(100000) %}{% if t in s %}{% endif %}{% endfor %}",
       kSteps},
      {"unique_in_loop",
       "{% for i in range(100000) %}{{ range(100000) | unique | length }}"
       "{% endfor %}",
       kSteps},
  };
}

class ChatTemplateBomb : public testing::TestWithParam<Bomb> {};

TEST_P(ChatTemplateBomb, EndsWithAnErrorNamingTheLimit) {
  const Bomb& b = GetParam();
  const Outcome o = run_isolated(b.source);
  // "chat template L:C: <what> than <the limit> (TemplateLimits::<field>)"
  const std::regex shape("(PARSE|RENDER): chat template [0-9]+:[0-9]+: .+ than " +
                         std::regex_replace(b.limit, std::regex(R"([()])"), R"(\$&)"));
  EXPECT_TRUE(std::regex_match(o.result, shape)) << o.result;
  EXPECT_LT(o.seconds, kHangGuardSeconds) << o.result;
  EXPECT_LT(o.rss_growth_mb, kMaxRssGrowthMb) << o.result;
  std::printf("%-26s %6.3f s %7.1f MB  %s\n", b.name.c_str(), o.seconds, o.rss_growth_mb,
              o.result.substr(0, 120).c_str());
}

INSTANTIATE_TEST_SUITE_P(Corpus, ChatTemplateBomb, testing::ValuesIn(bombs()),
                         [](const testing::TestParamInfo<Bomb>& info) { return info.param.name; });

// Not limits, but the same class of input: each once crashed (uncaught exception, SIGFPE) or
// hung, and now ends with an error or Python's answer.
TEST(ChatTemplateLimits, ArithmeticAndLiteralsAtTheEdges) {
  EXPECT_EQ(parse_and_render("{{ 9223372036854775807 + 1 }}"),
            "RENDER: chat template 1:24: integer overflow in '+'");
  EXPECT_EQ(parse_and_render("{{ (-9223372036854775807 - 1) // -1 }}"),
            "RENDER: chat template 1:31: integer overflow in '//'");
  EXPECT_EQ(parse_and_render("{{ (-9223372036854775807 - 1) % -1 }}"), "OK: 1 bytes");
  EXPECT_EQ(parse_and_render("{{ 2 ** 100000000000 }}"),
            "RENDER: chat template 1:6: integer overflow in '**'");
  EXPECT_EQ(parse_and_render("{{ 3 ** 39 }}"), "OK: 19 bytes");  // 4052555153018976267
  EXPECT_EQ(parse_and_render("{{ 1e999 }}"), "OK: 3 bytes");     // inf
  EXPECT_EQ(parse_and_render("{{ x.99999999999999999999 }}"),
            "PARSE: chat template 1:6: integer literal out of range");
  EXPECT_EQ(parse_and_render("{{ 1e300 | int }}"), "OK: 19 bytes");  // saturates
  EXPECT_EQ(parse_and_render("{{ 'abc' | indent(-5) }}"), "OK: 3 bytes");
  EXPECT_EQ(parse_and_render("{% set ns = namespace() %}{% set ns.me = ns %}"),
            "RENDER: chat template 1:30: a namespace inside a namespace");
  EXPECT_EQ(parse_and_render("{{ namespace(a=namespace()) }}"),
            "RENDER: chat template 1:13: a namespace inside a namespace");
}

TEST(ChatTemplateLimits, SlicesAndIndexesCountCodePoints) {
  ChatContext ctx;
  const auto render = [&](const std::string& source) {
    auto r = ChatTemplate::parse(source)->render(ctx);
    return r.ok() ? *r : r.status().message();
  };
  EXPECT_EQ(render("{{ 'abcdef'[::-2] }}|{{ 'abcdef'[1:99:2] }}|{{ 'abcdef'[-2:] }}"),
            "fdb|bdf|ef");
  EXPECT_EQ(render("{{ 'é€😀x'[::-1] }}|{{ 'é€😀x'[1:3] }}|{{ 'é€😀x'[-2] }}|{{ 'é€😀x'[::2] }}"),
            "x😀€é|€😀|😀|é😀");
  EXPECT_EQ(render("{{ 'é€😀x' | length }} {{ 'é€😀x' | reverse }} {{ 'é€😀x' | last }}"), "4 x😀€é x");
  EXPECT_EQ(render("{{ [1, 2, 3, 4][::-3] }} {{ [1, 2, 3][5:] }} {{ range(10)[8:2:-3] }}"),
            "[4, 1] [] [8, 5]");
  EXPECT_EQ(render("{{ [1, 1.0, true, 'a', 'a', none, 2] | unique | list }}"), "[1, 'a', None, 2]");
  // Loop scopes as before the frame reuse: the else branch sets in the enclosing scope, an
  // iteration does not see the previous one's variables.
  EXPECT_EQ(render("{% for x in [] %}{% else %}{% set y = 1 %}{% endfor %}{{ y }}"), "1");
  EXPECT_EQ(render("{% for x in [1, 2] %}{{ z }}{% set z = x %}{{ z }}{% endfor %}{{ z }}"), "12");
  EXPECT_EQ(render("{% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}{{ x }}{% endfor %}"), "1223");
  EXPECT_EQ(render("{{ [[1], [1]] | unique | list }}"),
            "chat template 1:15: unique: unhashable "
            "type: 'list'");
}

// The deepest template of each shape that parses also renders: recursion at max_depth fits a
// stack smaller than the default (kSmallStackBytes), in the sanitizer Debug build too, whose
// frames are the largest.
void deepest_templates_that_parse_render() {
  struct Shape {
    const char* name;
    std::function<std::string(int)> source;
    std::function<std::string(int)> expected;
  };
  const Shape shapes[] = {
      {"parentheses", [](int n) { return "{{ " + repeat("(", n) + "7" + repeat(")", n) + " }}"; },
       [](int) { return std::string("7"); }},
      {"lists", [](int n) { return "{{ " + repeat("[", n) + "7" + repeat("]", n) + " }}"; },
       [](int n) { return repeat("[", n) + "7" + repeat("]", n); }},
      {"dicts", [](int n) { return "{{ " + repeat("{'k': ", n) + "7" + repeat("}", n) + " }}"; },
       [](int n) { return repeat("{'k': ", n) + "7" + repeat("}", n); }},
      {"not", [](int n) { return "{{ " + repeat("not ", n) + "true }}"; },
       [](int n) { return std::string(n % 2 == 0 ? "True" : "False"); }},
      {"plus", [](int n) { return "{{ 1" + repeat(" + 1", n) + " }}"; },
       [](int n) { return std::to_string(n + 1); }},
      {"filters", [](int n) { return "{{ 'a'" + repeat(" | upper", n) + " }}"; },
       [](int) { return std::string("A"); }},
      {"subscripts", [](int n) { return "{{ 'abc'" + repeat("[0]", n) + " }}"; },
       [](int) { return std::string("a"); }},
      {"ifs", [](int n) { return repeat("{% if true %}", n) + "x" + repeat("{% endif %}", n); },
       [](int) { return std::string("x"); }},
      {"fors",
       [](int n) { return repeat("{% for a in [1] %}", n) + "x" + repeat("{% endfor %}", n); },
       [](int) { return std::string("x"); }},
      {"mixed",
       [](int n) {
         return repeat("{% if true %}", n / 2) + "{{ " + repeat("[", n / 2) + "1" +
                repeat("]", n / 2) + " }}" + repeat("{% endif %}", n / 2);
       },
       [](int n) { return repeat("[", n / 2) + "1" + repeat("]", n / 2); }},
  };
  for (const Shape& shape : shapes) {
    int lo = 1, hi = 2000;  // the largest n that parses
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (ChatTemplate::parse(shape.source(mid)).ok())
        lo = mid;
      else
        hi = mid - 1;
    }
    EXPECT_GT(lo, 60) << shape.name;
    auto deeper = ChatTemplate::parse(shape.source(lo + 1));
    ASSERT_FALSE(deeper.ok()) << shape.name;
    EXPECT_NE(deeper.status().message().find(kDepth), std::string::npos) << shape.name;
    auto t = ChatTemplate::parse(shape.source(lo));
    ASSERT_TRUE(t.ok()) << shape.name;
    auto out = t->render({});
    ASSERT_TRUE(out.ok()) << shape.name << " at " << lo << ": " << out.status().message();
    EXPECT_EQ(*out, shape.expected(lo)) << shape.name;
  }
}

TEST(ChatTemplateLimits, DeepestTemplatesThatParseRender) {
  run_on_stack(kSmallStackBytes, deepest_templates_that_parse_render);
}

// The same at render time: recursive macros and values nested to the limit.
void deepest_renders_fit_the_stack() {
  const auto macro = [](int n) {
    return "{% macro m(n) %}{% if n > 0 %}({{ m(n - 1) }}){% endif %}{% endmacro %}{{ m(" +
           std::to_string(n) + ") }}";
  };
  int lo = 1, hi = 2000;  // the deepest recursion that renders
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (ChatTemplate::parse(macro(mid))->render({}).ok())
      lo = mid;
    else
      hi = mid - 1;
  }
  EXPECT_GE(lo, 40);  // real templates recurse into tool schemas a few levels deep
  EXPECT_EQ(*ChatTemplate::parse(macro(lo))->render({}), repeat("(", lo) + repeat(")", lo));
  auto deeper = ChatTemplate::parse(macro(lo + 1))->render({});
  ASSERT_FALSE(deeper.ok());
  EXPECT_NE(deeper.status().message().find(kDepth), std::string::npos);

  const auto nested = [](int n) {
    return "{% set ns = namespace(x=7) %}{% for i in range(" + std::to_string(n) +
           ") %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}{{ ns.x | tojson }}";
  };
  auto at_limit = ChatTemplate::parse(nested(256))->render({});
  ASSERT_TRUE(at_limit.ok()) << at_limit.status().message();
  const std::string list = repeat("[", 256) + "7" + repeat("]", 256);
  EXPECT_EQ(*at_limit, list + list);
  auto over = ChatTemplate::parse(nested(257))->render({});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "chat template 1:69: a value nested 257 levels: deeper than " + kDepth);
}

TEST(ChatTemplateLimits, DeepestRendersFitTheStack) {
  run_on_stack(kSmallStackBytes, deepest_renders_fit_the_stack);
}

// Real templates stay far from every limit, even with their conversations made 100 times
// longer (the golden tests check the bytes; this checks the headroom).
TEST(ChatTemplateLimits, FixtureTemplatesNeverReachALimit) {
  const std::filesystem::path dir = test::source_dir() / "tests" / "fixtures" / "chat";
  const auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  int templates = 0, long_renders = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "templates")) {
    EXPECT_TRUE(ChatTemplate::parse(read(entry.path())).ok()) << entry.path();
    ++templates;
  }
  EXPECT_GE(templates, 12);
  for (const auto& entry : std::filesystem::directory_iterator(dir / "cases")) {
    auto doc = parse_json(read(entry.path()));
    ASSERT_TRUE(doc.ok()) << entry.path();
    const Object& c = doc->as_object();
    if (c.find("error") != nullptr) continue;
    const Object& cx = c.find("context")->as_object();
    auto t = ChatTemplate::parse(read(dir / "templates" / c.find("template")->as_string()));
    ASSERT_TRUE(t.ok()) << entry.path();
    ChatContext ctx;
    if (const Value* tools = cx.find("tools")) ctx.tools = *tools;
    ctx.bos_token = cx.find("bos_token")->as_string();
    ctx.eos_token = cx.find("eos_token")->as_string();
    ctx.add_generation_prompt = cx.find("add_generation_prompt")->as_bool();
    if (const Value* extra = cx.find("extra")) ctx.extra = extra->as_object();
    ctx.now = std::tm{};
    // The system message (if any) once, then the rest 100 times over.
    const Array& base = cx.find("messages")->as_array();
    const bool system = !base.empty() && base[0].as_object().find("role")->as_string() == "system";
    Array messages(base.begin(), base.begin() + (system ? 1 : 0));
    for (int r = 0; r < 100; ++r)
      messages.insert(messages.end(), base.begin() + (system ? 1 : 0), base.end());
    ctx.messages = Value(std::move(messages));
    auto out = t->render(ctx);
    // Some templates reject the repetition (e.g. roles must alternate); none may hit a limit.
    if (!out.ok()) {
      EXPECT_EQ(out.status().message().find("TemplateLimits::"), std::string::npos)
          << entry.path() << ": " << out.status().message();
    } else {
      ++long_renders;
    }
  }
  EXPECT_GE(long_renders, 40);
}

TEST(ChatTemplateLimits, DefaultsAreTheDocumentedOnes) {
  const TemplateLimits d;
  EXPECT_EQ(d.max_source_bytes, 1u << 20);
  EXPECT_EQ(d.max_depth, 256);
  EXPECT_EQ(d.max_output_bytes, 16u << 20);
  EXPECT_EQ(d.max_value_bytes, 16u << 20);
  EXPECT_EQ(d.max_value_items, 1u << 20);
  EXPECT_EQ(d.max_loop_iterations, 1'000'000u);
  EXPECT_EQ(d.max_steps, 10'000'000u);
}

// Each limit is a parameter: lowered it fails sooner with its own value in the message, raised
// it lets a trusted template do more. Budgets are per render, not per template.
TEST(ChatTemplateLimits, LimitsAreParameters) {
  const auto render = [](const std::string& source, const TemplateLimits& limits) {
    auto t = ChatTemplate::parse(source, limits);
    if (!t.ok()) return "PARSE: " + t.status().message();
    auto r = t->render({});
    return r.ok() ? *r : "RENDER: " + r.status().message();
  };
  const std::string big(2 << 20, 'x');
  EXPECT_EQ(render(big, {}),
            "PARSE: chat template 1:1: a template of 2097152 bytes: larger than the limit of "
            "1048576 bytes (TemplateLimits::max_source_bytes)");
  EXPECT_EQ(render(big, {.max_source_bytes = 4 << 20}), big);
  EXPECT_EQ(render("{{ [[[[[[[[1]]]]]]]] }}", {.max_depth = 8}),
            "PARSE: chat template 1:11: nesting deeper than the limit of 8 levels "
            "(TemplateLimits::max_depth)");
  EXPECT_EQ(render("{{ [[[[1]]]] }}", {.max_depth = 8}), "[[[[1]]]]");
  EXPECT_EQ(render("ab{{ 'cdef' }}", {.max_output_bytes = 4}),
            "RENDER: chat template 1:3: output longer than the limit of 4 bytes "
            "(TemplateLimits::max_output_bytes)");
  EXPECT_EQ(render("{{ 'ab' ~ 'cd' }}", {.max_value_bytes = 3}),
            "RENDER: chat template 1:9: a string of 4 bytes: larger than the limit of 3 bytes "
            "(TemplateLimits::max_value_bytes)");
  EXPECT_EQ(render("{{ [1, 2] + [3] }}", {.max_value_items = 2}),
            "RENDER: chat template 1:11: a list of 3 items: more than the limit of 2 items "
            "(TemplateLimits::max_value_items)");
  EXPECT_EQ(render("{% for i in range(2) %}{% for j in range(2) %}{% endfor %}{% endfor %}",
                   {.max_loop_iterations = 5}),
            "RENDER: chat template 1:27: more loop iterations than the limit of 5 iterations "
            "(TemplateLimits::max_loop_iterations)");
  EXPECT_EQ(render("{% for i in range(3) %}{{ i }}{% endfor %}", {.max_steps = 10}),
            "RENDER: chat template 1:18: more evaluation steps than the limit of 10 steps "
            "(TemplateLimits::max_steps)");
  // Raised: a 20 MB prompt (over the 16 MiB default) for a caller that wants one.
  const std::string twenty_mb = "{{ 'x' * 10000000 }}{{ 'y' * 10000000 }}";
  EXPECT_NE(render(twenty_mb, {}).find("TemplateLimits::max_output_bytes"), std::string::npos);
  EXPECT_EQ(render(twenty_mb, {.max_output_bytes = 32 << 20}).size(), 20'000'000u);
  // The step budget is spent per render: with exactly the steps one render needs, every
  // render succeeds, and with one step less none does.
  const std::string loop = "{% for i in range(100) %}{{ i }}{% endfor %}";
  uint64_t lo = 1, hi = 100'000;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (ChatTemplate::parse(loop, {.max_steps = mid})->render({}).ok())
      hi = mid;
    else
      lo = mid + 1;
  }
  auto exact = ChatTemplate::parse(loop, {.max_steps = lo});
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->limits().max_steps, lo);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(exact->render({}).ok()) << i;
  EXPECT_FALSE(ChatTemplate::parse(loop, {.max_steps = lo - 1})->render({}).ok());
}

}  // namespace
}  // namespace cera::runtime::chat
