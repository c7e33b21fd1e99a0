// `convert` and `synth` never destroy what their -o names by accident: a device node stays a
// device, an input stays byte-identical, and a refused write leaves no file in the folder.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli_runner.h"
#include "test_paths.h"

namespace cera::test {
namespace {

namespace fs = std::filesystem;

std::string read_back(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = temp_dir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

size_t entries(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}));
}

TEST(CliOutputPaths, SynthRefusesADeviceNodeAndAFifo) {
  const fs::path dir = fresh_dir("cli-out-device");
  std::vector<fs::path> targets;
  // `mknod n c 1 3` needs root; a FIFO shows the same class of target to anyone.
  if (::mknod((dir / "n").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) targets.push_back(dir / "n");
  ASSERT_EQ(::mkfifo((dir / "f").c_str(), 0600), 0);
  targets.push_back(dir / "f");
  const size_t before = entries(dir);
  for (const fs::path& t : targets) {
    const CliResult r = run_cera({"synth", "--shape", "tiny", "-o", t.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(t.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("choose another output path"), std::string::npos) << r.err;
    struct stat st {};
    ASSERT_EQ(::stat(t.c_str(), &st), 0);
    EXPECT_FALSE(S_ISREG(st.st_mode)) << t << " was replaced by a regular file";
  }
  EXPECT_EQ(entries(dir), before) << "a refused output left a file behind";
}

TEST(CliOutputPaths, ConvertRefusesToOverwriteItsInput) {
  const fs::path dir = fresh_dir("cli-out-input");
  const fs::path ckpt = dir / "x.bin";
  fs::copy_file(shared_dir() / "models/stories260K.bin", ckpt);
  const std::string original = read_back(ckpt);
  fs::create_hard_link(ckpt, dir / "same-inode.bin");
  for (const fs::path& out : {ckpt, dir / "same-inode.bin"}) {
    const CliResult r = run_cera({"convert", "--llama2c", ckpt.string(), "--tokenizer",
                                  (shared_dir() / "models/tok512.bin").string(), "-o", out.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("is the input"), std::string::npos) << r.err;
  }
  EXPECT_EQ(read_back(ckpt), original);
  EXPECT_EQ(entries(dir), 2u);
}

}  // namespace
}  // namespace cera::test
