// generate --prompt-cache (#17): the first run saves the prefilled prompt, a second run of the
// same prompt restores it (nothing to prefill) and a longer prompt that begins with it runs only
// the rest; the output is the same as without the cache; a cache of another model or a damaged
// file is reported, not used, and replaced.
// Common-prefix reuse: a prompt that diverges from the cached one mid-way (or ends inside it)
// restores the shared beginning (rewound); after a ring wrap the rewind is refused, reported, and
// the whole prompt runs. chat --prompt-cache: the first turn (template, --system, first message)
// is the cached prompt; replies are byte-identical to chat without the cache.
#include <stdio.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

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

// The random model's vocabulary is <unk>, <s>, </s> and the 256 bytes: ids 3..258 are all
// ordinary tokens, so --prompt-ids picks the prompts' exact tokens.
std::string ids(int first, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + std::to_string(first + i);
  return s;
}

TEST(CliPromptCache, ReusesTheCommonPrefixOfADivergingPrompt) {
  const std::string dir = temp_dir();
  RandomModelShape shape;
  AlignedBuffer bytes;
  std::string err;
  ASSERT_TRUE(random_model(shape, DType::F32, &bytes, &err)) << err;
  const std::string model = dir + "/m.rlm";
  ASSERT_TRUE(write_file(model, bytes.data(), bytes.size()));
  const std::string cache = dir + "/prompt.cache";
  const std::string base = "-m " + model + " -n 10 --temp 0.9 --seed 5";
  // Cached: 3..22 (20 tokens). Then 3..14 followed by 100..107: 12 shared, 8 new.
  const std::string cached_ids = " --prompt-ids '" + ids(3, 20) + "'";
  const std::string diverging = " --prompt-ids '" + ids(3, 12) + " " + ids(100, 8) + "'";
  int n = 0, m = 0, k = 0;
  const GenRun first = generate(base + cached_ids + " --prompt-cache " + cache, dir);
  ASSERT_EQ(first.rc, 0) << first.err;
  ASSERT_TRUE(restored(first.err, &n, &m, &k)) << first.err;
  EXPECT_EQ(n, 0);
  EXPECT_EQ(m, 20);

  const GenRun plain = generate(base + diverging, dir);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  const GenRun reuse = generate(base + diverging + " --prompt-cache " + cache, dir);
  ASSERT_EQ(reuse.rc, 0) << reuse.err;
  ASSERT_TRUE(restored(reuse.err, &n, &m, &k)) << reuse.err;
  EXPECT_EQ(n, 12) << "the shared beginning comes from the cache";
  EXPECT_EQ(m, 20);
  EXPECT_EQ(k, 8);
  EXPECT_FALSE(plain.out.empty());
  EXPECT_EQ(reuse.out, plain.out);

  // The cache now holds the diverging prompt. A prompt that is a beginning of it: all but its
  // last token are restored (a rewind drops the logits; one token must run to make them).
  const std::string shorter = " --prompt-ids '" + ids(3, 9) + "'";
  const GenRun plain_short = generate(base + shorter, dir);
  const GenRun short_run = generate(base + shorter + " --prompt-cache " + cache, dir);
  ASSERT_EQ(short_run.rc, 0) << short_run.err;
  ASSERT_TRUE(restored(short_run.err, &n, &m, &k)) << short_run.err;
  EXPECT_EQ(n, 8);
  EXPECT_EQ(k, 1);
  EXPECT_EQ(short_run.out, plain_short.out);

  // No common first token: nothing restored, nothing reported but the count.
  const std::string other = " --prompt-ids '" + ids(50, 6) + "'";
  const GenRun plain_other = generate(base + other, dir);
  const GenRun other_run = generate(base + other + " --prompt-cache " + cache, dir);
  ASSERT_EQ(other_run.rc, 0) << other_run.err;
  ASSERT_TRUE(restored(other_run.err, &n, &m, &k)) << other_run.err;
  EXPECT_EQ(n, 0);
  EXPECT_EQ(k, 6);
  EXPECT_EQ(other_run.err.find("--prompt-cache " + cache + ":"), std::string::npos) << other_run.err;
  EXPECT_EQ(other_run.out, plain_other.out);
}

TEST(CliPromptCache, ACacheWhoseRingWrappedCannotBeRewound) {
  const std::string dir = temp_dir();
  RandomModelShape shape;
  AlignedBuffer bytes;
  std::string err;
  ASSERT_TRUE(random_model(shape, DType::F32, &bytes, &err)) << err;
  const std::string model = dir + "/m.rlm";
  ASSERT_TRUE(write_file(model, bytes.data(), bytes.size()));
  const std::string cache = dir + "/prompt.cache";
  // 24 prompt tokens in a 16-slot ring: the saved ring has wrapped, earlier positions are gone.
  const std::string base = "-m " + model + " -n 6 --temp 0 --ctx 16 --sinks 4";
  const GenRun first = generate(base + " --prompt-ids '" + ids(3, 24) + "' --prompt-cache " + cache, dir);
  ASSERT_EQ(first.rc, 0) << first.err;
  const std::string diverging = " --prompt-ids '" + ids(3, 8) + " " + ids(120, 4) + "'";
  const GenRun plain = generate(base + diverging, dir);
  const GenRun run = generate(base + diverging + " --prompt-cache " + cache, dir);
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_NE(run.err.find("RLM_ERR_REWIND"), std::string::npos) << run.err;
  int n = 0, m = 0, k = 0;
  ASSERT_TRUE(restored(run.err, &n, &m, &k)) << run.err;
  EXPECT_EQ(n, 0);
  EXPECT_EQ(k, 12);
  EXPECT_EQ(run.out, plain.out);
}

// chat --prompt-cache on a synthetic ChatML model (random weights, made by `ringlm convert
// --synthetic`: no shared data needed).
class ChatPromptCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    std::ofstream(dir_ + "/config.json")
        << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "vocab_size": 600, "max_position_embeddings": 1024,
              "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": true})";
    model_ = dir_ + "/chat.rlm";
    cache_ = dir_ + "/chat.cache";
    std::string out;
    ASSERT_EQ(run_command(ringlm_bin() + " convert --synthetic " + dir_ +
                              "/config.json --chat chatml --quant q8 -q -o " + model_ + " 2>&1",
                          &out),
              0)
        << out;
  }
  struct ChatRun {
    int rc = 0;
    std::string out, err;
    std::vector<int> run;  // per turn: tokens run ("[turn: N new tokens, R run, ...")
    std::vector<int> generated;
  };
  // `ringlm chat` with `lines` on stdin: sampled replies (a seed, so the RNG must match too).
  ChatRun chat(const std::string& lines, const std::string& flags) {
    ChatRun r;
    const std::string in = dir_ + "/in.txt", err_file = dir_ + "/stderr.txt";
    std::ofstream(in, std::ios::binary) << lines;
    r.rc = run_command(ringlm_bin() + " chat -m " + model_ + " --stats --system '" + kSystem +
                           "' " + flags + " < " + in + " 2>" + err_file,
                       &r.out);
    read_file(err_file, &r.err);
    static const std::regex re(R"(\[turn: \d+ new tokens, (\d+) run, (\d+) generated)");
    for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), re);
         it != std::sregex_iterator(); ++it) {
      r.run.push_back(std::stoi((*it)[1]));
      r.generated.push_back(std::stoi((*it)[2]));
    }
    return r;
  }
  static constexpr const char* kSystem =
      "You are a careful assistant. Answer in short sentences, name your sources, and say so "
      "when you do not know something. Never invent numbers.";
  std::string dir_, model_, cache_;
};

TEST_F(ChatPromptCache, RepliesEqualChatWithoutTheCache) {
  const std::string input = "Hello there\nAnd a second question\n";
  const std::string flags = "-n 8 --temp 0.9 --seed 21";
  const ChatRun plain = chat(input, flags);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  ASSERT_EQ(plain.run.size(), 2u) << plain.err;

  int n = 0, m = 0, k = 0;
  const ChatRun first = chat(input, flags + " --prompt-cache " + cache_);
  ASSERT_EQ(first.rc, 0) << first.err;
  ASSERT_TRUE(restored(first.err, &n, &m, &k)) << first.err;
  EXPECT_EQ(n, 0) << "no cache yet";
  EXPECT_EQ(k, m);
  EXPECT_EQ(first.out, plain.out);
  EXPECT_EQ(first.run, plain.run);
  EXPECT_NE(first.err.find("] [first token "), std::string::npos) << first.err;
  std::string saved;
  ASSERT_TRUE(read_file(cache_, &saved)) << "the first run writes the cache";

  const ChatRun second = chat(input, flags + " --prompt-cache " + cache_);
  ASSERT_EQ(second.rc, 0) << second.err;
  ASSERT_TRUE(restored(second.err, &n, &m, &k)) << second.err;
  EXPECT_EQ(n, m) << "the whole first turn comes from the cache";
  EXPECT_EQ(k, 0);
  EXPECT_EQ(second.out, plain.out);
  ASSERT_EQ(second.run.size(), 2u) << second.err;
  // Turn 1 ran only its decode steps (the first token is sampled from the saved logits); turn 2
  // is not cached and runs as before.
  EXPECT_EQ(second.run[0], second.generated[0] - 1);
  EXPECT_EQ(second.run[1], plain.run[1]);

  // The cache holds the saved run's sampling, -n and RNG: a run with others samples with its own.
  const std::string other_flags = "-n 5 --temp 1.3 --seed 99";
  const ChatRun plain_other = chat(input, other_flags);
  const ChatRun other = chat(input, other_flags + " --prompt-cache " + cache_);
  ASSERT_EQ(other.rc, 0) << other.err;
  ASSERT_TRUE(restored(other.err, &n, &m, &k)) << other.err;
  EXPECT_EQ(n, m);
  EXPECT_EQ(other.generated, plain_other.generated);
  EXPECT_EQ(other.out, plain_other.out);
  EXPECT_NE(other.out, plain.out) << "another seed should give other replies";
}

TEST_F(ChatPromptCache, SameSystemOtherMessageReusesTheSystemPrompt) {
  const std::string flags = "-n 8 --temp 0.9 --seed 4";
  int n = 0, m = 0, k = 0;
  const ChatRun first = chat("What is the capital of France?\nThanks\n",
                             flags + " --prompt-cache " + cache_);
  ASSERT_EQ(first.rc, 0) << first.err;
  ASSERT_TRUE(restored(first.err, &n, &m, &k)) << first.err;
  EXPECT_EQ(n, 0);

  const std::string input = "Tell me a joke\nAnother one\n";
  const ChatRun plain = chat(input, flags);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  const ChatRun reuse = chat(input, flags + " --prompt-cache " + cache_);
  ASSERT_EQ(reuse.rc, 0) << reuse.err;
  ASSERT_TRUE(restored(reuse.err, &n, &m, &k)) << reuse.err;
  // The template and --system are most of the first turn: all of that is shared, the message
  // and what follows it run.
  EXPECT_GT(n, 0);
  EXPECT_LT(n, m);
  EXPECT_GT(2 * n, m) << "the system prompt is most of the turn";
  EXPECT_EQ(n + k, m);
  EXPECT_EQ(reuse.out, plain.out);
  ASSERT_EQ(reuse.run.size(), 2u) << reuse.err;
  EXPECT_EQ(reuse.run[0], plain.run[0] - n) << "only the rest of the first turn ran";
  EXPECT_EQ(reuse.run[1], plain.run[1]);

  // The same message under another --system shares only the template's opening tokens.
  std::string out;
  const std::string in = dir_ + "/in2.txt", err_file = dir_ + "/stderr2.txt";
  std::ofstream(in) << "Tell me a joke\n";
  ASSERT_EQ(run_command(ringlm_bin() + " chat -m " + model_ + " --system 'Be terse.' " + flags +
                            " --prompt-cache " + cache_ + " < " + in + " 2>" + err_file,
                        &out),
            0);
  std::string err;
  read_file(err_file, &err);
  int n2 = 0, m2 = 0, k2 = 0;
  ASSERT_TRUE(restored(err, &n2, &m2, &k2)) << err;
  EXPECT_LT(n2, n);
  EXPECT_EQ(n2 + k2, m2);
}

TEST_F(ChatPromptCache, ACorruptCacheIsReportedAndReplaced) {
  const std::string input = "Hello there\nAnd a second question\n";
  const std::string flags = "-n 6 --temp 0.9 --seed 8";
  const ChatRun plain = chat(input, flags);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  int n = 0, m = 0, k = 0;

  // Not a prompt cache at all.
  const std::string junk = "this is not a prompt cache, just text";
  ASSERT_TRUE(write_file(cache_, junk.data(), junk.size()));
  const ChatRun junk_run = chat(input, flags + " --prompt-cache " + cache_);
  ASSERT_EQ(junk_run.rc, 0) << junk_run.err;
  EXPECT_NE(junk_run.err.find("not a prompt cache"), std::string::npos) << junk_run.err;
  ASSERT_TRUE(restored(junk_run.err, &n, &m, &k)) << junk_run.err;
  EXPECT_EQ(n, 0);
  EXPECT_EQ(junk_run.out, plain.out);

  // Replaced by a valid one: the next run restores all of it.
  const ChatRun after_junk = chat(input, flags + " --prompt-cache " + cache_);
  ASSERT_TRUE(restored(after_junk.err, &n, &m, &k)) << after_junk.err;
  EXPECT_EQ(n, m);
  EXPECT_EQ(after_junk.out, plain.out);

  // A byte of the snapshot changed: the checksum refuses it.
  std::string damaged;
  ASSERT_TRUE(read_file(cache_, &damaged));
  damaged[damaged.size() / 2] ^= 0x20;
  ASSERT_TRUE(write_file(cache_, damaged.data(), damaged.size()));
  const ChatRun broken = chat(input, flags + " --prompt-cache " + cache_);
  ASSERT_EQ(broken.rc, 0) << broken.err;
  EXPECT_NE(broken.err.find("RLM_ERR_SNAPSHOT_CORRUPT"), std::string::npos) << broken.err;
  ASSERT_TRUE(restored(broken.err, &n, &m, &k)) << broken.err;
  EXPECT_EQ(n, 0);
  EXPECT_EQ(broken.out, plain.out);

  // Cut short inside its token list.
  damaged.resize(20);
  ASSERT_TRUE(write_file(cache_, damaged.data(), damaged.size()));
  const ChatRun cut = chat(input, flags + " --prompt-cache " + cache_);
  ASSERT_EQ(cut.rc, 0) << cut.err;
  EXPECT_NE(cut.err.find("truncated"), std::string::npos) << cut.err;
  EXPECT_EQ(cut.out, plain.out);

  const ChatRun again = chat(input, flags + " --prompt-cache " + cache_);
  ASSERT_TRUE(restored(again.err, &n, &m, &k)) << again.err;
  EXPECT_EQ(n, m) << "the damaged cache was replaced";
  EXPECT_EQ(again.out, plain.out);
}

}  // namespace
