// generate --prompt-cache (#17): the first run saves the prefilled prompt, a second run of the
// same prompt restores it (nothing to prefill) and a longer prompt that begins with it runs only
// the rest; the output is the same as without the cache; a cache of another model or a damaged
// file is reported, not used, and replaced.
#include <stdio.h>

#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "testing.h"

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {

bool write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  return static_cast<bool>(f);
}

struct GenRun {
  int rc = 0;
  std::string out, err;
};

GenRun generate(const std::string& args, const std::string& dir) {
  GenRun r;
  const std::string err_file = dir + "/stderr.txt";
  r.rc = run_command(ringlm_bin() + " generate " + args + " 2>" + err_file, &r.out);
  read_file(err_file, &r.err);
  return r;
}

// "N of M prompt tokens restored, K run"
bool restored(const std::string& err, int* n, int* m, int* k) {
  std::smatch mt;
  if (!std::regex_search(err, mt, std::regex("([0-9]+) of ([0-9]+) prompt tokens restored, ([0-9]+) run")))
    return false;
  *n = std::stoi(mt[1]);
  *m = std::stoi(mt[2]);
  *k = std::stoi(mt[3]);
  return true;
}

TEST(CliPromptCache, SavesRestoresAndExtends) {
  const std::string dir = temp_dir();
  RandomModelShape shape;
  AlignedBuffer bytes;
  std::string err;
  ASSERT_TRUE(random_model(shape, DType::F32, &bytes, &err)) << err;
  const std::string model = dir + "/m.rlm";
  ASSERT_TRUE(write_file(model, bytes.data(), bytes.size()));
  shape.seed = 77;
  ASSERT_TRUE(random_model(shape, DType::F32, &bytes, &err)) << err;
  const std::string other = dir + "/other.rlm";
  ASSERT_TRUE(write_file(other, bytes.data(), bytes.size()));
  const std::string cache = dir + "/prompt.cache";
  const std::string base = " -n 12 --temp 0 -p 'the cached system prompt'";
  const GenRun plain = generate("-m " + model + base, dir);
  ASSERT_EQ(plain.rc, 0) << plain.err;

  int n = 0, m = 0, k = 0;
  const GenRun first = generate("-m " + model + base + " --prompt-cache " + cache, dir);
  ASSERT_EQ(first.rc, 0) << first.err;
  ASSERT_TRUE(restored(first.err, &n, &m, &k)) << first.err;
  EXPECT_EQ(n, 0);
  EXPECT_EQ(k, m);
  EXPECT_EQ(first.out, plain.out);

  const GenRun second = generate("-m " + model + base + " --prompt-cache " + cache, dir);
  ASSERT_EQ(second.rc, 0) << second.err;
  ASSERT_TRUE(restored(second.err, &n, &m, &k)) << second.err;
  EXPECT_EQ(n, m) << "the whole prompt comes from the cache";
  EXPECT_EQ(k, 0);
  EXPECT_EQ(second.out, plain.out);

  // A longer prompt beginning with the cached one: only the rest runs.
  const std::string longer = " -n 12 --temp 0 -p 'the cached system prompt, and a question'";
  const GenRun plain_long = generate("-m " + model + longer, dir);
  const GenRun ext = generate("-m " + model + longer + " --prompt-cache " + cache, dir);
  ASSERT_EQ(ext.rc, 0) << ext.err;
  ASSERT_TRUE(restored(ext.err, &n, &m, &k)) << ext.err;
  EXPECT_GT(n, 0);
  EXPECT_EQ(n + k, m);
  EXPECT_GT(k, 0);
  EXPECT_EQ(ext.out, plain_long.out);

  // Another model: the snapshot is refused, reported, and the output is that model's own.
  const GenRun plain_other = generate("-m " + other + longer, dir);
  const GenRun mismatch = generate("-m " + other + longer + " --prompt-cache " + cache, dir);
  ASSERT_EQ(mismatch.rc, 0) << mismatch.err;
  EXPECT_NE(mismatch.err.find("RLM_ERR_SNAPSHOT_MISMATCH"), std::string::npos) << mismatch.err;
  EXPECT_EQ(mismatch.out, plain_other.out);

  // A damaged file: reported and replaced.
  std::string damaged;
  ASSERT_TRUE(read_file(cache, &damaged));
  damaged[damaged.size() / 2] ^= 0x20;
  ASSERT_TRUE(write_file(cache, damaged.data(), damaged.size()));
  const GenRun broken = generate("-m " + other + longer + " --prompt-cache " + cache, dir);
  ASSERT_EQ(broken.rc, 0) << broken.err;
  EXPECT_NE(broken.err.find("RLM_ERR_SNAPSHOT_CORRUPT"), std::string::npos) << broken.err;
  EXPECT_EQ(broken.out, plain_other.out);
  const GenRun again = generate("-m " + other + longer + " --prompt-cache " + cache, dir);
  ASSERT_TRUE(restored(again.err, &n, &m, &k)) << again.err;
  EXPECT_EQ(n, m) << "the damaged cache was replaced";
  EXPECT_EQ(again.out, plain_other.out);
}

}  // namespace
