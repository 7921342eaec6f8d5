// Chat: template rendering per family, and `ringlm chat` on a random-weight ChatML model: the KV
// prefix is kept across turns (each turn runs only its new tokens) and the end-of-turn token stops.
#include <stdio.h>

#include <fstream>
#include <random>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "convert/chat_template.h"
#include "testing.h"

using namespace ringlm_test;

namespace {

std::string flatten(const std::vector<ChatSegment>& segs) {
  std::string s;
  for (const ChatSegment& g : segs) s += g.special ? "[" + g.text + "]" : g.text;
  return s;
}

}  // namespace

TEST(ChatTemplate, DetectsFamiliesFromTemplateText) {
  ChatFormat f;
  EXPECT_TRUE(chat_format_detect("{{'<|im_start|>' + role}}", &f));
  EXPECT_EQ(f, ChatFormat::ChatML);
  EXPECT_TRUE(chat_format_detect("<|start_header_id|>{{ role }}<|end_header_id|>", &f));
  EXPECT_EQ(f, ChatFormat::Llama3);
  EXPECT_TRUE(chat_format_detect("<start_of_turn>user", &f));
  EXPECT_EQ(f, ChatFormat::Gemma);
  EXPECT_TRUE(chat_format_detect("<|user|>\n{{ content }}<|end|>", &f));
  EXPECT_EQ(f, ChatFormat::Phi3);
  EXPECT_FALSE(chat_format_detect("{{ messages }}", &f));
}

TEST(ChatTemplate, RendersEachFamily) {
  EXPECT_EQ(flatten(chat_render_turn(ChatFormat::ChatML, "Be brief.", "Hi", true, false)),
            "[<|im_start|>]system\nBe brief.[<|im_end|>]\n[<|im_start|>]user\nHi[<|im_end|>]\n"
            "[<|im_start|>]assistant\n");
  EXPECT_EQ(flatten(chat_render_turn(ChatFormat::ChatML, "Be brief.", "More", false, true)),
            "\n[<|im_start|>]user\nMore[<|im_end|>]\n[<|im_start|>]assistant\n");
  EXPECT_EQ(flatten(chat_render_turn(ChatFormat::Llama3, "", "Hi", true, false)),
            "[<|start_header_id|>]user[<|end_header_id|>]\n\nHi[<|eot_id|>]"
            "[<|start_header_id|>]assistant[<|end_header_id|>]\n\n");
  EXPECT_EQ(flatten(chat_render_turn(ChatFormat::Gemma, "Sys", "Hi", true, false)),
            "[<start_of_turn>]user\nSys\n\nHi[<end_of_turn>]\n[<start_of_turn>]model\n");
  EXPECT_EQ(flatten(chat_render_turn(ChatFormat::Phi3, "", "Hi", false, true)),
            "\n[<|user|>]\nHi[<|end|>]\n[<|assistant|>]\n");
  EXPECT_STREQ(chat_end_of_turn(ChatFormat::Gemma), "<end_of_turn>");
  EXPECT_TRUE(chat_wants_bos(ChatFormat::Llama3));
  EXPECT_FALSE(chat_wants_bos(ChatFormat::ChatML));
}

class ChatCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    // A tiny Llama-shaped config: 1 layer, vocab 600 (the last pieces become ChatML specials;
    // the end-of-turn token <|im_end|> is id 599).
    std::ofstream(dir_ + "/config.json")
        << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "vocab_size": 600, "max_position_embeddings": 512,
              "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": true})";
    model_ = dir_ + "/chat.rlm";
    std::string out;
    ASSERT_EQ(run_command(ringlm_bin() + " convert --synthetic " + dir_ +
                              "/config.json --chat chatml --quant q8 -q -o " + model_ + " 2>&1",
                          &out),
              0)
        << out;
  }
  // Runs chat with `input` on stdin; returns stderr's [turn: ...] lines (and stdout in *text).
  std::vector<std::smatch> turns(const std::string& input, const std::string& flags,
                                 std::string* log, int expect_status = 0) {
    const std::string in = dir_ + "/in.txt";
    std::ofstream(in, std::ios::binary) << input;
    std::string out;
    EXPECT_EQ(run_command(ringlm_bin() + " chat -m " + model_ + " --stats --temp 0 " + flags +
                              " < " + in + " 2>&1 >/dev/null",
                          &out),
              expect_status)
        << out;
    *log = out;
    std::vector<std::smatch> res;
    static const std::regex re(
        R"(\[turn: (\d+) new tokens, (\d+) run, (\d+) generated, position (\d+), stop ([a-z-]+)\])");
    for (auto it = std::sregex_iterator(log->begin(), log->end(), re); it != std::sregex_iterator();
         ++it) {
      res.push_back(*it);
    }
    return res;
  }
  std::string dir_, model_;
};

TEST_F(ChatCli, KeepsTheKvPrefixAcrossTurns) {
  std::string log;
  auto t = turns("Hello!\nHow are you?\n", "-n 6", &log);
  ASSERT_EQ(t.size(), 2u) << log;
  const int new1 = std::stoi(t[0][1]), run1 = std::stoi(t[0][2]), pos1 = std::stoi(t[0][4]);
  const int new2 = std::stoi(t[1][1]), run2 = std::stoi(t[1][2]), pos2 = std::stoi(t[1][4]);
  EXPECT_EQ(t[0][5], "max-tokens");
  // Turn 1: its prompt plus 5 decode steps. Turn 2: the previous reply's last token, its own new
  // tokens (which start with the <|im_end|> that closes the cut reply) and 5 decode steps —
  // nothing of turn 1 is run again.
  EXPECT_EQ(run1, new1 + 5);
  EXPECT_EQ(run2, 1 + new2 + 5);
  EXPECT_EQ(pos1, run1);
  EXPECT_EQ(pos2, pos1 + run2);
}

TEST_F(ChatCli, EndOfTurnTokenStopsAndUndoRewinds) {
  std::string log;
  // Force <|im_end|> (id 599) as every reply's first token.
  auto t = turns("Hi\nSecond\n/undo\nSecond again\n", "-n 20 --logit-bias 599=100", &log);
  ASSERT_EQ(t.size(), 3u) << log;
  for (const auto& m : t) {
    EXPECT_EQ(m[5], "end-of-turn");
    EXPECT_EQ(m[3], "1");
  }
  // /undo rewound to the start of turn 2, so turn 3 lands at the same position turn 2 did
  // ("Second again" is longer than "Second" by " again").
  const int pos2 = std::stoi(t[1][4]), pos3 = std::stoi(t[2][4]);
  const int new2 = std::stoi(t[1][1]), new3 = std::stoi(t[2][1]);
  EXPECT_EQ(pos3 - pos2, new3 - new2);
}

TEST_F(ChatCli, RefusesAModelWithoutATemplate) {
  std::string out;
  const std::string plain = dir_ + "/plain.rlm";
  ASSERT_EQ(run_command(ringlm_bin() + " convert --synthetic " + dir_ +
                            "/config.json --quant q8 -q -o " + plain + " 2>&1",
                        &out),
            0)
      << out;
  EXPECT_EQ(run_command("echo hi | " + ringlm_bin() + " chat -m " + plain + " 2>&1", &out), 1);
  EXPECT_NE(out.find("--template"), std::string::npos) << out;
}

// Issue #12: lines whose token count exceeds their byte count (byte fallback turns a space into
// the 3 bytes of "▁"), long lines and binary noise are ordinary turns, not fatal errors.
TEST_F(ChatCli, LinesOfAnyLengthAndContentAreTurns) {
  std::string log;
  auto t = turns("hello world hello world\nHi\n", "-n 2", &log);
  EXPECT_EQ(t.size(), 2u) << log;

  // (Shorter under qemu and the sanitizers, where every token of the long line costs 10-50x;
  // under qemu 600 bytes, still more tokens than the model's 512 positions.)
  std::string input = std::string(emulated() ? 600 : light() ? 1000 : 3000, 'x');
  for (size_t i = 0; i < input.size(); i += 4) input[i] = ' ';
  input += "\n";
  std::mt19937 rng(12);
  std::string noise;
  for (int i = 0, n = emulated() ? 512 : light() ? 1024 : 4096; i < n; ++i) noise += static_cast<char>(rng() & 0xff);
  size_t lines = 1;
  for (char c : noise) lines += c == '\n';
  input += noise + "\nbye\n";
  lines += 2;  // the noise's last line and "bye"
  // --ctx above the model's 512 so the 3000-byte line fits the context.
  t = turns(input, "-n 2 --ctx 8192", &log);
  size_t quits = 0;  // a noise line that happens to read /undo, /reset or /quit
  for (size_t a = 0, b; (b = noise.find('\n', a)) != std::string::npos; a = b + 1) {
    const std::string l = noise.substr(a, b - a);
    quits += l == "/undo" || l == "/reset" || l == "/quit";
  }
  ASSERT_EQ(quits, 0u);
  EXPECT_EQ(t.size(), lines) << log;
}

TEST_F(ChatCli, AMessageThatDoesNotFitIsSkippedAndTheConversationGoesOn) {
  std::string log_ref, log;
  const auto ref = turns("Hi\nSecond\n", "-n 3 --max-prompt 60", &log_ref);
  ASSERT_EQ(ref.size(), 2u) << log_ref;
  // The long line between them is refused, the status says something was skipped, and the
  // conversation is exactly as if it had not been typed.
  const auto t = turns("Hi\n" + std::string(200, 'z') + "\nSecond\n", "-n 3 --max-prompt 60",
                       &log, 1);
  ASSERT_EQ(t.size(), 2u) << log;
  EXPECT_NE(log.find("--max-prompt 60; skipped"), std::string::npos) << log;
  EXPECT_EQ(t[1].str(), ref[1].str());
  // Default: the context (512 slots here) bounds a message.
  const auto d = turns(std::string(600, 'z') + "\nHi\n", "-n 3", &log, 1);
  ASSERT_EQ(d.size(), 1u) << log;
  EXPECT_NE(log.find("--max-prompt 512"), std::string::npos) << log;
  EXPECT_EQ(d[0].str(), ref[0].str());
}

TEST_F(ChatCli, UnlimitedRepliesAndCtxErrorsNameTheFlags) {
  std::string out;
  EXPECT_EQ(run_command("echo hi | " + ringlm_bin() + " chat -m " + model_ + " -c 3 2>&1", &out),
            2);
  EXPECT_NE(out.find("--sinks 4 must be less than --ctx"), std::string::npos) << out;
  // -n -1 (llama.cpp's "unlimited") is accepted: the reply runs to the end-of-turn token.
  std::string log;
  auto t = turns("Hi\n", "-n -1 --logit-bias 599=100", &log);
  ASSERT_EQ(t.size(), 1u) << log;
  EXPECT_EQ(t[0][5], "end-of-turn");
}
