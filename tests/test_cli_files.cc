// The files the `ringlm` CLI reads and writes (issue #12, defects 1, 5, parts of 6 and 7):
// output targets that are not regular files are refused, never replaced; inputs that are not
// regular files are refused, never waited on; interrupted and oversized conversions leave nothing
// behind; `embed --symbol` names compile; non-ringlm files opened as models say what they are.
//
// Every command runs the built binary under `timeout 20`, so a regression to blocking on a FIFO
// fails the test (exit 124) instead of hanging the suite.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing.h"

namespace {

using ringlm_test::run_command;

std::string bin() { return "timeout 20 " + ringlm_test::ringlm_bin(); }

bool have_cli() { return access(ringlm_test::ringlm_bin_path().c_str(), X_OK) == 0; }

// Runs `args` through the CLI with stderr folded into the returned text.
int ringlm(const std::string& args, std::string* out) {
  return run_command(bin() + " " + args + " 2>&1", out);
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::string read_all(const std::string& path) {
  std::string s;
  ringlm_test::read_file(path, &s);
  return s;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

mode_t lmode(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

// Names in `dir` that start with `prefix` (temporary files left behind).
std::vector<std::string> leftovers(const std::string& dir, const std::string& prefix) {
  std::string out;
  run_command("ls -a '" + dir + "'", &out);
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t nl = out.find('\n', pos);
    const std::string name = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (name.compare(0, prefix.size(), prefix) == 0) names.push_back(name);
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return names;
}

// A tiny Llama config for `convert --synthetic` (no shared model needed).
std::string tiny_config(const std::string& dir, int layers = 2, int hidden = 64, int ffn = 128,
                        int heads = 4) {
  const std::string path = dir + "/config.json";
  write_file(path, "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], "
                   "\"hidden_size\": " + std::to_string(hidden) +
                       ", \"num_hidden_layers\": " + std::to_string(layers) +
                       ", \"num_attention_heads\": " + std::to_string(heads) +
                       ", \"num_key_value_heads\": " + std::to_string(heads) +
                       ", \"intermediate_size\": " + std::to_string(ffn) +
                       ", \"vocab_size\": 300, \"max_position_embeddings\": 128, "
                       "\"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0}");
  return path;
}

// A small valid model file in `dir` (synthetic weights).
std::string tiny_model(const std::string& dir) {
  const std::string cfg = tiny_config(dir);
  const std::string out = dir + "/tiny.rlm";
  std::string text;
  EXPECT_EQ(ringlm("convert --synthetic " + cfg + " --quant q8 -o " + out + " -q", &text), 0)
      << text;
  return out;
}

class CliFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_cli()) GTEST_SKIP() << "ringlm binary not built";
    dir_ = ringlm_test::temp_dir();
  }
  std::string dir_;
};

// ---- output targets (defect 1) ----------------------------------------------------------------

TEST_F(CliFiles, ConvertRefusesCharacterDeviceTarget) {
  const std::string dev = dir_ + "/dev";
  if (mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod failed (needs root): " << strerror(errno);
  }
  const std::string cfg = tiny_config(dir_);
  std::string text;
  EXPECT_EQ(ringlm("convert --synthetic " + cfg + " --quant q8 -o " + dev + " -q", &text), 1);
  EXPECT_TRUE(contains(text, "character device")) << text;
  EXPECT_TRUE(S_ISCHR(lmode(dev))) << "the device node was replaced";
  EXPECT_TRUE(leftovers(dir_, "dev.tmp").empty());
  // embed, both its outputs.
  const std::string model = tiny_model(dir_);
  EXPECT_EQ(ringlm("embed " + model + " -o " + dev, &text), 1);
  EXPECT_TRUE(contains(text, "character device")) << text;
  EXPECT_EQ(ringlm("embed " + model + " -o " + dir_ + "/m.c --header " + dev, &text), 1);
  EXPECT_TRUE(contains(text, "character device")) << text;
  EXPECT_TRUE(S_ISCHR(lmode(dev)));
}

TEST_F(CliFiles, ConvertRefusesFifoSymlinkDirectoryAndReadOnlyTargets) {
  const std::string cfg = tiny_config(dir_);
  const std::string convert = "convert --synthetic " + cfg + " --quant q8 -q -o ";
  std::string text;

  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_EQ(ringlm(convert + fifo, &text), 1);
  EXPECT_TRUE(contains(text, "FIFO")) << text;
  EXPECT_TRUE(S_ISFIFO(lmode(fifo))) << "the FIFO was replaced";

  // A symlink is refused, not followed and not replaced: both the link and its target stay.
  const std::string real = dir_ + "/real.rlm", link = dir_ + "/link.rlm";
  write_file(real, "original");
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  EXPECT_EQ(ringlm(convert + link, &text), 1);
  EXPECT_TRUE(contains(text, "symbolic link")) << text;
  EXPECT_TRUE(S_ISLNK(lmode(link)));
  EXPECT_TRUE(read_all(real) == "original") << "the symlink target was overwritten";

  const std::string sub = dir_ + "/sub";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  EXPECT_EQ(ringlm(convert + sub, &text), 1);
  EXPECT_TRUE(contains(text, "directory")) << text;
  EXPECT_TRUE(S_ISDIR(lmode(sub)));

  // Read-only: refused even for root (whose access(W_OK) says yes).
  const std::string ro = dir_ + "/ro.rlm";
  write_file(ro, "keep me");
  ASSERT_EQ(chmod(ro.c_str(), 0444), 0);
  EXPECT_EQ(ringlm(convert + ro, &text), 1);
  EXPECT_TRUE(contains(text, "read-only")) << text;
  EXPECT_TRUE(read_all(ro) == "keep me") << "the read-only file was replaced";

  // A writable regular file is replaced, as before.
  const std::string rw = dir_ + "/rw.rlm";
  write_file(rw, "old");
  EXPECT_EQ(ringlm(convert + rw, &text), 0) << text;
  EXPECT_EQ(read_all(rw).substr(8, 4), "RLM1");
  for (const char* p : {"fifo.tmp", "link.rlm.tmp", "sub.tmp", "ro.rlm.tmp", "rw.rlm.tmp"})
    EXPECT_TRUE(leftovers(dir_, p).empty()) << p;
}

TEST_F(CliFiles, EmbedRefusesSpecialTargetsAndLeavesNoTemporaryFile) {
  const std::string model = tiny_model(dir_);
  std::string text;
  const std::string fifo = dir_ + "/fifo.h";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  // --header used to be opened in place with fopen("wb"): on a FIFO that blocked forever.
  EXPECT_EQ(ringlm("embed " + model + " -o " + dir_ + "/m.c --header " + fifo, &text), 1);
  EXPECT_TRUE(contains(text, "FIFO")) << text;
  EXPECT_TRUE(S_ISFIFO(lmode(fifo)));
  EXPECT_EQ(ringlm("embed " + model + " -o " + fifo, &text), 1);
  EXPECT_TRUE(S_ISFIFO(lmode(fifo)));

  // The temporary name was a fixed OUT.tmp opened with fopen: a symlink planted there was
  // followed and its target overwritten.
  const std::string victim = dir_ + "/victim";
  write_file(victim, "precious");
  ASSERT_EQ(symlink(victim.c_str(), (dir_ + "/out.c.tmp").c_str()), 0);
  EXPECT_EQ(ringlm("embed " + model + " -o " + dir_ + "/out.c --header " + dir_ + "/out.h", &text),
            0)
      << text;
  EXPECT_TRUE(read_all(victim) == "precious") << "the planted symlink was followed";
  EXPECT_TRUE(contains(read_all(dir_ + "/out.c"), "const size_t out_size"));
  EXPECT_TRUE(contains(read_all(dir_ + "/out.h"), "extern const size_t out_size;"));
  EXPECT_TRUE(leftovers(dir_, "out.c.tmp-").empty());
  EXPECT_TRUE(leftovers(dir_, "out.h.tmp-").empty());
}

TEST_F(CliFiles, OutputThatIsAnInputIsRefused) {
  const std::string model = tiny_model(dir_);
  const std::string before = read_all(model);
  std::string text;
  // embed used to replace the model it had just read with its C source.
  EXPECT_EQ(ringlm("embed " + model + " -o " + model, &text), 2);
  EXPECT_TRUE(contains(text, "the model itself")) << text;
  EXPECT_EQ(ringlm("embed " + model + " -o " + dir_ + "/m.c --header " + model, &text), 2);
  EXPECT_EQ(ringlm("embed " + model + " -o " + dir_ + "/m.c --header " + dir_ + "/m.c", &text), 2);
  const std::string cfg = dir_ + "/config.json";
  EXPECT_EQ(ringlm("convert --synthetic " + cfg + " -o " + cfg + " -q", &text), 2);
  EXPECT_TRUE(contains(text, "is an input")) << text;
  EXPECT_TRUE(read_all(model) == before) << "the model was replaced";
  EXPECT_EQ(read_all(cfg).substr(0, 1), "{");
}

// ---- embed --symbol (defect 6, part) -----------------------------------------------------------

TEST_F(CliFiles, EmbedRefusesKeywordSymbols) {
  const std::string blob = dir_ + "/blob.bin";
  write_file(blob, std::string(100, 'x'));
  std::string text;
  for (const char* kw : {"int", "while", "_Bool", "class", "1abc", "a-b", "size_t"}) {
    const std::string out = dir_ + "/k.c";
    EXPECT_EQ(ringlm("embed --no-verify " + blob + " -o " + out + " --symbol '" + kw + "'", &text),
              2)
        << kw;
    EXPECT_TRUE(contains(text, "--symbol")) << text;
    EXPECT_NE(access(out.c_str(), F_OK), 0) << kw << ": wrote a file";
  }
  // A default name derived from the file name is made valid instead.
  EXPECT_EQ(ringlm("embed --no-verify " + blob + " -o " + dir_ + "/int.c", &text), 0) << text;
  const std::string c = read_all(dir_ + "/int.c");
  EXPECT_TRUE(contains(c, "const unsigned char model_int[]")) << c.substr(0, 400);
  // And the generated C compiles, when a host C compiler is there.
  if (run_command("command -v cc >/dev/null 2>&1", nullptr) == 0) {
    EXPECT_EQ(run_command("cc -fsyntax-only -x c " + dir_ + "/int.c 2>&1", &text), 0) << text;
  }
}

// ---- inputs that are not regular files (defect 5) ---------------------------------------------

TEST_F(CliFiles, FifoAndDirectoryInputsAreRefusedWithoutBlocking) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string out = dir_ + "/o.rlm";
  std::string text;
  const std::vector<std::string> cases = {
      "generate -m " + fifo + " -p hi -n 1",
      "inspect " + fifo,
      "bench -m " + fifo,
      "embed " + fifo + " -o " + dir_ + "/e.c",
      "tokenize --vocab " + fifo + " hi",
      "convert " + fifo + " -o " + out + " -q",
      "convert --synthetic " + fifo + " -o " + out + " -q",
  };
  for (const std::string& args : cases) {
    const int rc = ringlm(args, &text);
    EXPECT_NE(rc, 124) << args << ": blocked on the FIFO";
    EXPECT_NE(rc, 0) << args;
    EXPECT_TRUE(contains(text, "FIFO")) << args << ": " << text;
  }
  // A directory as a model: named as one (was "No such device" from mmap).
  for (const std::string& args : {"generate -m " + dir_ + " -p hi -n 1", "inspect " + dir_}) {
    EXPECT_EQ(ringlm(args, &text), 1) << args;
    EXPECT_TRUE(contains(text, "is a directory")) << args << ": " << text;
  }
  // A llama2.c checkpoint's --tokenizer (std::ifstream blocked on a FIFO).
  const std::string ckpt = ringlm_test::shared_path("models/stories260K/stories260K.bin");
  if (!ckpt.empty()) {
    const int rc = ringlm("convert " + ckpt + " --tokenizer " + fifo + " -o " + out + " -q", &text);
    EXPECT_EQ(rc, 1) << text;
    EXPECT_TRUE(contains(text, "FIFO")) << text;
  }
  EXPECT_NE(access(out.c_str(), F_OK), 0);
}

TEST_F(CliFiles, HugeSparseConfigIsRefusedNotRead) {
  const std::string sub = dir_ + "/hf";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  // 2 GiB of holes: reading it whole used to allocate 2 GiB.
  ASSERT_EQ(truncate((tiny_config(sub)).c_str(), 2ll << 30), 0);
  std::string text;
  EXPECT_EQ(ringlm("convert --synthetic " + sub + " -o " + dir_ + "/o.rlm -q", &text), 1);
  EXPECT_TRUE(contains(text, "limited to")) << text;
}

// ---- unbounded work (defect 5) -----------------------------------------------------------------

TEST_F(CliFiles, SyntheticShapeIsBoundedBeforeWriting) {
  const std::string cfg = tiny_config(dir_);
  const std::string out = dir_ + "/big.rlm";
  std::string text;
  // Used to write ~hundreds of GB before the final verification refused 99999 layers.
  EXPECT_EQ(ringlm("convert --synthetic smollm2-135m --layers 99999 -o " + out + " -q", &text), 1);
  EXPECT_TRUE(contains(text, "n_layers 99999")) << text;
  EXPECT_EQ(ringlm("convert --synthetic " + cfg + " --layers 1025 -o " + out + " -q", &text), 1);
  EXPECT_TRUE(contains(text, "limit 1024")) << text;
  EXPECT_EQ(ringlm("convert --synthetic " + cfg + " --layers 0 -o " + out + " -q", &text), 2);
  EXPECT_TRUE(contains(text, "--layers")) << text;
  // A config beyond the runtime's dimension limits.
  const std::string sub = dir_ + "/wide";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  tiny_config(sub, 2, 1 << 17, 128);
  EXPECT_EQ(ringlm("convert --synthetic " + sub + " -o " + out + " -q", &text), 1);
  EXPECT_TRUE(contains(text, "hidden_size")) << text;
  // Within every limit but far larger than any disk (1024 layers of 65536 x 262144 f32
  // matrices): refused before the first byte, not when the disk fills.
  const std::string huge = dir_ + "/huge";
  ASSERT_EQ(mkdir(huge.c_str(), 0755), 0);
  tiny_config(huge, 1024, 1 << 16, 1 << 18, 64);
  EXPECT_EQ(ringlm("convert --synthetic " + huge + " --quant f32 -o " + out + " -q", &text), 1);
  EXPECT_TRUE(contains(text, "free")) << text;
  EXPECT_NE(access(out.c_str(), F_OK), 0);
  EXPECT_TRUE(leftovers(dir_, "big.rlm.tmp").empty());
}

TEST_F(CliFiles, InterruptedConvertRemovesItsTemporaryFile) {
  // SIGTERM once the temporary file exists (a shell's background job ignores SIGINT, which the
  // handler then leaves ignored; the same handler serves both). The conversion takes seconds
  // (135 M parameters quantized), the poll 10 ms.
  const std::string out = dir_ + "/int.rlm";
  const std::string script =
      bin() + " convert --synthetic smollm2-135m --quant q8 -q -o " +
      out + " >/dev/null 2>&1 & pid=$!; i=0; "
      "while [ -z \"$(ls " + dir_ + " | grep '^int.rlm.tmp-')\" ] && [ $i -lt 2000 ]; do "
      "sleep 0.01; i=$((i+1)); done; kill -TERM $pid; wait $pid; echo $?";
  std::string text;
  ASSERT_EQ(run_command(script, &text), 0);
  // timeout(1) passes the child's signal death on as 128 + 15.
  EXPECT_EQ(atoi(text.c_str()), 128 + SIGTERM) << text;
  EXPECT_TRUE(leftovers(dir_, "int.rlm.tmp").empty()) << "temporary file left behind";
  EXPECT_NE(access(out.c_str(), F_OK), 0);
}

// ---- what a non-ringlm file is (defect 7, part) ------------------------------------------------

TEST_F(CliFiles, NonRingLmModelFilesSayWhatTheyAre) {
  std::string gguf = "GGUF";
  gguf += std::string("\x03\0\0\0", 4);
  gguf += std::string(4096, '\0');
  write_file(dir_ + "/m.gguf", gguf);
  std::string text;
  EXPECT_EQ(ringlm("inspect " + dir_ + "/m.gguf", &text), 1);
  EXPECT_TRUE(contains(text, "GGUF file")) << text;
  EXPECT_TRUE(contains(text, "ringlm convert")) << text;
  EXPECT_FALSE(contains(text, "1179993927")) << text;
  EXPECT_EQ(ringlm("generate -m " + dir_ + "/m.gguf -p hi -n 1", &text), 1);
  EXPECT_TRUE(contains(text, "GGUF file")) << text;

  const std::string ckpt = ringlm_test::shared_path("models/stories260K/stories260K.bin");
  if (!ckpt.empty()) {
    EXPECT_EQ(ringlm("generate -m " + ckpt + " -p hi -n 1", &text), 1);
    EXPECT_TRUE(contains(text, "not a ringlm model file")) << text;
  }

  // Converting a converted model: said so (was "not a llama2.c checkpoint").
  const std::string model = tiny_model(dir_);
  EXPECT_EQ(ringlm("convert " + model + " -o " + dir_ + "/again.rlm -q", &text), 1);
  EXPECT_TRUE(contains(text, "already a ringlm model")) << text;
}

}  // namespace
