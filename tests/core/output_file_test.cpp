// OutputFile and read_file against what the operating system reports about the paths involved:
// devices, FIFOs and directories are never replaced, an input is never overwritten, a failed
// write (the file-size limit standing in for a full disk) leaves neither a partial file nor a
// changed target.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/mapped_file.h"
#include "core/output_file.h"
#include "core/read_file.h"
#include "test_paths.h"

namespace cera {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void put(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// Names in `dir` other than the ones given: a leftover temporary file shows up here.
std::vector<std::string> extra_entries(const fs::path& dir, const std::vector<std::string>& expected) {
  std::vector<std::string> extra;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (std::find(expected.begin(), expected.end(), name) == expected.end()) extra.push_back(name);
  }
  return extra;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = test::temp_dir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(OutputFile, WritesAndReplacesARegularFileKeepingItsMode) {
  const fs::path dir = fresh_dir("out-regular");
  const fs::path out = dir / "model.gguf";
  put(out, "old contents");
  ::chmod(out.c_str(), 0640);
  auto f = OutputFile::create(out);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_TRUE(f->write(std::string_view("new contents")).ok());
  EXPECT_EQ(slurp(out), "old contents");  // nothing visible before the commit
  ASSERT_TRUE(f->commit().ok());
  EXPECT_EQ(slurp(out), "new contents");
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_TRUE(extra_entries(dir, {"model.gguf"}).empty());
}

TEST(OutputFile, RefusesACharacterDeviceAndLeavesItAlone) {
  const fs::path dir = fresh_dir("out-device");
  const fs::path node = dir / "n";
  // mknod n c 1 3 (a second /dev/null) needs root; without it the real /dev/null is checked,
  // which the test can only read (the check refuses it before anything is written).
  fs::path device = node;
  if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) device = "/dev/null";
  const Status st = check_output_path(device);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("character device"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(device.string()), std::string::npos) << st.message();
  EXPECT_FALSE(OutputFile::create(device).ok());
  struct stat s {};
  ASSERT_EQ(::stat(device.c_str(), &s), 0);
  EXPECT_TRUE(S_ISCHR(s.st_mode));
  EXPECT_TRUE(extra_entries(dir, {"n"}).empty());
}

TEST(OutputFile, RefusesAFifoADirectoryAndADanglingLink) {
  const fs::path dir = fresh_dir("out-fifo");
  ASSERT_EQ(::mkfifo((dir / "f").c_str(), 0600), 0);
  fs::create_directory(dir / "d");
  fs::create_symlink(dir / "missing", dir / "link");
  for (const char* name : {"f", "d", "link"}) {
    const Status st = check_output_path(dir / name);
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_NE(st.message().find((dir / name).string()), std::string::npos) << st.message();
  }
  EXPECT_NE(check_output_path(dir / "f").message().find("FIFO"), std::string::npos);
  EXPECT_NE(check_output_path(dir / "d").message().find("directory"), std::string::npos);
  struct stat s {};
  ASSERT_EQ(::stat((dir / "f").c_str(), &s), 0);
  EXPECT_TRUE(S_ISFIFO(s.st_mode));
}

TEST(OutputFile, RefusesAnInputEvenThroughAnotherName) {
  const fs::path dir = fresh_dir("out-input");
  put(dir / "x.bin", "checkpoint");
  fs::create_hard_link(dir / "x.bin", dir / "hard.bin");
  fs::create_symlink(dir / "x.bin", dir / "soft.bin");
  const fs::path inputs[] = {dir / "tok.bin", dir / "x.bin"};
  for (const char* name : {"x.bin", "hard.bin", "soft.bin"}) {
    const Status st = check_output_path(dir / name, inputs);
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_NE(st.message().find("is the input"), std::string::npos) << st.message();
  }
  EXPECT_EQ(slurp(dir / "x.bin"), "checkpoint");
  EXPECT_TRUE(check_output_path(dir / "other.gguf", inputs).ok());
}

TEST(OutputFile, WritesThroughASymbolicLink) {
  const fs::path dir = fresh_dir("out-link");
  put(dir / "target.gguf", "old");
  fs::create_symlink("target.gguf", dir / "link.gguf");
  auto f = OutputFile::create(dir / "link.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_TRUE(f->write(std::string_view("new")).ok());
  ASSERT_TRUE(f->commit().ok());
  EXPECT_TRUE(fs::is_symlink(dir / "link.gguf"));
  EXPECT_EQ(slurp(dir / "target.gguf"), "new");
}

TEST(OutputFile, AbandonedOrFailedWritesLeaveNothingBehind) {
  const fs::path dir = fresh_dir("out-fail");
  put(dir / "keep.gguf", "precious");
  {
    auto f = OutputFile::create(dir / "keep.gguf");
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->write(std::string_view("half")).ok());
    EXPECT_EQ(extra_entries(dir, {"keep.gguf"}).size(), 1u);  // the temporary file exists
  }  // destroyed without commit: an error path of the caller
  EXPECT_TRUE(extra_entries(dir, {"keep.gguf"}).empty());
  EXPECT_EQ(slurp(dir / "keep.gguf"), "precious");

  // A write the system refuses (the file-size limit makes write() fail as a full disk does).
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto f = OutputFile::create(dir / "keep.gguf");
  ASSERT_TRUE(f.ok());
  const std::string big(1 << 20, 'x');
  const Status st = f->write(std::string_view(big));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("keep.gguf"), std::string::npos) << st.message();
  EXPECT_FALSE(f->commit().ok());
  EXPECT_TRUE(extra_entries(dir, {"keep.gguf"}).empty());
  EXPECT_EQ(slurp(dir / "keep.gguf"), "precious");

  // A commit that cannot replace the target removes the temporary file too.
  fs::create_directory(dir / "sub");
  auto g = OutputFile::create(dir / "sub" / "out.gguf");
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(g->write(std::string_view("data")).ok());
  const std::vector<std::string> before = extra_entries(dir / "sub", {});
  ASSERT_EQ(before.size(), 1u);
  fs::create_directory(dir / "sub" / "out.gguf");  // the target became a directory meanwhile
  EXPECT_FALSE(g->commit().ok());
  EXPECT_TRUE(extra_entries(dir / "sub", {"out.gguf"}).empty());
}

TEST(ReadFile, RefusesFifosDevicesAndDirectoriesAndBoundsTheSize) {
  const fs::path dir = fresh_dir("read");
  ASSERT_EQ(::mkfifo((dir / "f").c_str(), 0600), 0);
  // A FIFO without a writer: refused at once, not a blocked open.
  auto fifo = read_file(dir / "f", 1 << 20);
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find("FIFO"), std::string::npos);
  auto zero = read_file("/dev/zero", 1 << 20);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("character device"), std::string::npos);
  auto d = read_file(dir, 1 << 20);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("directory"), std::string::npos);

  put(dir / "big.json", std::string(1000, ' '));
  auto big = read_file(dir / "big.json", 999, "raise it with --x");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("1000 bytes, over the limit of 999 bytes (raise it with --x)"),
            std::string::npos)
      << big.status().message();
  auto ok = read_file(dir / "big.json", 1000);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), 1000u);
}

TEST(MappedFile, RefusesAFifoWithoutBlocking) {
  const fs::path dir = fresh_dir("map");
  ASSERT_EQ(::mkfifo((dir / "f").c_str(), 0600), 0);
  auto m = MappedFile::open(dir / "f");  // `cera inspect f` blocked forever here
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("FIFO"), std::string::npos) << m.status().message();
  auto z = MappedFile::open("/dev/zero");
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("character device"), std::string::npos) << z.status().message();
}

}  // namespace
}  // namespace cera
