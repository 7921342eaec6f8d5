// ringlm convert SOURCE [--tokenizer FILE]
//   [--quant f32|f16|q8|q4|q5|q4_1|q5_1|q4k|q5k|q6k|q4k_m|q5k_m|keep] -o OUT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iostream>
#include <string>

#include "commands.h"
#include "convert/chat_specials.h"
#include "convert/convert.h"
#include "convert/output_file.h"
#include "convert/synthetic.h"
#include "tokenizer_source.h"

namespace {

void usage(FILE* f) {
  fprintf(f,
          "usage: ringlm convert SOURCE [--tokenizer FILE]\n"
          "                      [--quant f32|f16|q8|q4|q5|q4_1|q5_1|q4k|q5k|q6k|q4k_m|q5k_m|keep]\n"
          "                      -o OUT\n"
          "       ringlm convert --synthetic SPEC [--layers N] [--seed S] [--chat FORMAT]\n"
          "                      [--vocab FILE] [--quant ...] -o OUT\n"
          "\n"
          "SOURCE is one of\n"
          "  a llama2.c legacy float checkpoint (.bin; needs --tokenizer tokenizer.bin)\n"
          "  a GGUF v3 file (llama, qwen2, qwen3, gemma2, gemma3, phi3 architectures;\n"
          "                     tensors F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,\n"
          "                     Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, read exactly as\n"
          "                     llama.cpp dequantizes them; IQ1/IQ2/IQ3 and ternary types are\n"
          "                     refused naming the tensor)\n"
          "  a Hugging Face model directory (config.json, model.safetensors or its shards,\n"
          "                     tokenizer.json) of the same families\n"
          "\n"
          "options:\n"
          "  --tokenizer FILE   llama2.c tokenizer (tokenizer.bin / tok512.bin)\n"
          "  --quant TYPE       storage of 2-D weights: f32 (default), f16, q8, q4, q5, q4_1,\n"
          "                     q5_1, q4k, q5k, q6k, the mixed presets q4k_m / q5k_m, or keep;\n"
          "                     norms stay f32. q5: 5-bit with an f16 scale per 32 (GGUF\n"
          "                     Q5_0's, 5.5 bits). q4_1 / q5_1: unsigned 4- / 5-bit with an f16\n"
          "                     scale and min per 32 (GGUF Q4_1's / Q5_1's, 5 / 6 bits).\n"
          "                     q4k: 4-bit with a 6-bit scale and min per 32 (GGUF Q4_K's\n"
          "                     arithmetic, ~4.6 bits per weight); q5k: the same with 5 bits\n"
          "                     (GGUF Q5_K's, ~5.6 bits); q6k: 6-bit with an int8 scale per 16\n"
          "                     (GGUF Q6_K's, ~6.6 bits); q4k_m / q5k_m: q4k / q5k with the\n"
          "                     output projection and some layers' attention V and FFN down in\n"
          "                     q6k (llama.cpp's Q4_K_M / Q5_K_M rules). GGUF Q8_0 -> q8 and\n"
          "                     Q4_0 -> q4 and Q4_1 -> q4_1 are copied, Q5_0 -> q5 (or q8),\n"
          "                     Q5_1 -> q5_1, IQ4_NL -> q8, Q4_K -> q4k, Q5_K -> q5k and\n"
          "                     Q6_K / Q3_K -> q6k repacked, all without re-quantization;\n"
          "                     other types are dequantized and re-encoded.\n"
          "                     keep: each tensor in the smallest encoding that holds its\n"
          "                     values exactly: Q8_0/IQ4_NL -> q8, Q4_0 -> q4, Q5_0 -> q5,\n"
          "                     Q4_1 -> q4_1, Q5_1 -> q5_1, Q4_K -> q4k, Q5_K -> q5k,\n"
          "                     Q6_K/Q3_K -> q6k, F16 -> f16, F32/BF16/other types -> f16 if\n"
          "                     every value is an f16 value, else f32 (those are read twice:\n"
          "                     checked, then written)\n"
          "  -o, --output OUT   output model file (written to a temporary file, verified, renamed;\n"
          "                     an existing OUT must be a writable regular file: directories,\n"
          "                     devices, FIFOs and symbolic links are refused, never replaced)\n"
          "  -v, --verbose      one line per tensor: source type -> encoding, and what was\n"
          "                     done (copied / repacked / stored exactly, or the relative RMSE\n"
          "                     of a re-quantization); by default only the summary lines\n"
          "  -q, --quiet        no header line or progress bar either\n"
          "  --allow-non-finite store NaN / infinite weights (and values the target type\n"
          "                     overflows to inf) instead of refusing the tensor; such a\n"
          "                     model runs but computes NaN wherever they are used\n"
          "\n"
          "random-weight models (no checkpoint needed; for benchmarks and demos):\n"
          "  --synthetic SPEC   SPEC is a Hugging Face config.json (or its directory) or a\n"
          "                     built-in shape (smollm2-135m); weights are deterministic noise\n"
          "  --layers N         use N layers instead of the config's (1..1024, the runtime's\n"
          "                     limit; all dimensions are checked before anything is written)\n"
          "  --seed S           weight seed (default 1)\n"
          "  --chat FORMAT      give the synthetic vocabulary a chat template and its special\n"
          "                     tokens: chatml, llama3, gemma or phi3 (for `ringlm chat`)\n"
          "  --vocab FILE       a real vocabulary instead of the synthetic one (GGUF, e.g. a\n"
          "                     vocab-only file; tokenizer.json or its directory; a tiktoken\n"
          "                     rank file such as Llama 3's tokenizer.model; llama2.c\n"
          "                     tokenizer.bin): its size replaces the config's vocab_size, for\n"
          "                     benchmarks whose cost grows with the vocabulary\n");
}

}  // namespace

int cmd_convert(int argc, char** argv) {
  ringlm::internal::conv::ConvertOptions opts;
  std::string out, synthetic, chat, vocab;
  uint32_t layers = 0, seed = 1;
  bool quiet = false, verbose = false;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "ringlm convert: %s needs a value\n", flag);
        return nullptr;
      }
      return argv[++i];
    };
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--tokenizer") || !strcmp(a, "-t")) {
      const char* v = value(a);
      if (!v) return 2;
      opts.tokenizer = v;
    } else if (!strcmp(a, "--quant") || !strcmp(a, "--dtype")) {
      const char* v = value(a);
      if (!v) return 2;
      opts.keep = !strcmp(v, "keep");
      opts.preset.clear();
      if (opts.keep) {
        opts.quant = ringlm::internal::fb::DType::F32;
      } else if (ringlm::internal::conv::apply_quant_preset(v, nullptr, &opts.quant)) {
        opts.preset = v;
      } else if (!ringlm::internal::conv::parse_dtype(v, &opts.quant)) {
        fprintf(stderr, "ringlm convert: unknown --quant '%s' (f32, f16, q8, q4, q5, q4_1, q5_1, q4k, q5k, q6k, %s, keep)\n",
                v, ringlm::internal::conv::quant_preset_names());
        return 2;
      }
    } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
      const char* v = value(a);
      if (!v) return 2;
      out = v;
    } else if (!strcmp(a, "--vocab")) {
      const char* v = value(a);
      if (!v) return 2;
      vocab = v;
    } else if (!strcmp(a, "--synthetic") || !strcmp(a, "--chat") || !strcmp(a, "--layers") ||
               !strcmp(a, "--seed")) {
      const char* v = value(a);
      if (!v) return 2;
      char* end = nullptr;
      const unsigned long n = strtoul(v, &end, 10);
      const bool number_ok = *v && !*end && n <= 0xffffffffUL;
      if (!strcmp(a, "--synthetic")) {
        synthetic = v;
      } else if (!strcmp(a, "--chat")) {
        chat = v;
      } else if (!number_ok) {
        fprintf(stderr, "ringlm convert: bad number '%s' for %s\n", v, a);
        return 2;
      } else if (!strcmp(a, "--layers")) {
        if (n == 0) {
          fprintf(stderr, "ringlm convert: --layers must be at least 1\n");
          return 2;
        }
        layers = static_cast<uint32_t>(n);
      } else {
        seed = static_cast<uint32_t>(n);
      }
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = true;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      verbose = true;
    } else if (!strcmp(a, "--allow-non-finite")) {
      opts.allow_non_finite = true;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "ringlm convert: unknown option '%s'\n\n", a);
      usage(stderr);
      return 2;
    } else if (opts.source.empty()) {
      opts.source = a;
    } else {
      fprintf(stderr, "ringlm convert: more than one SOURCE ('%s', '%s')\n\n",
              opts.source.c_str(), a);
      usage(stderr);
      return 2;
    }
  }
  if ((opts.source.empty() == synthetic.empty()) || out.empty()) {
    fprintf(stderr, "ringlm convert: %s\n\n",
            out.empty() ? "no -o OUT" : "give exactly one of SOURCE / --synthetic SPEC");
    usage(stderr);
    return 2;
  }
  if (!synthetic.empty() && opts.keep) {
    fprintf(stderr, "ringlm convert: --quant keep keeps a source's encodings; a synthetic model "
                    "has none (give f32, f16, q8, q4, q5, q4_1, q5_1, q4k, q5k, q6k, q4k_m or q5k_m)\n");
    return 2;
  }
  if (synthetic.empty() && (!chat.empty() || layers || seed != 1 || !vocab.empty())) {
    fprintf(stderr, "ringlm convert: --chat, --layers, --seed and --vocab go with --synthetic\n");
    return 2;
  }
  if (!chat.empty() && !vocab.empty()) {
    fprintf(stderr, "ringlm convert: --chat gives the synthetic vocabulary chat tokens; a --vocab "
                    "file brings its own, give one or the other\n");
    return 2;
  }
  {
    // Before any reading: a refused target (a device, FIFO, symlink, read-only file) should not
    // cost a conversion first. write_model_file checks again when it renames.
    std::string err;
    if (!ringlm::internal::conv::check_output_target(out, &err)) {
      fprintf(stderr, "ringlm convert: %s\n", err.c_str());
      return 1;
    }
    // The source is read while the output is written: replacing it would lose the checkpoint.
    for (const std::string& in : {opts.source, opts.tokenizer, synthetic, vocab}) {
      if (!in.empty() && ringlm::internal::conv::same_file(in, out)) {
        fprintf(stderr, "ringlm convert: -o '%s' is an input of this conversion\n", out.c_str());
        return 2;
      }
    }
  }
  opts.progress = !quiet;
  opts.log = verbose ? &std::cout : nullptr;
  if (!synthetic.empty()) {
    ringlm::internal::conv::SyntheticOptions so;
    so.n_layers_override = layers;
    ringlm::internal::conv::ModelData md;
    std::string err, kind;
    ringlm::internal::conv::TokenizerData vocab_data;
    if (!vocab.empty()) {
      if (!read_vocab_data(vocab, &vocab_data, &kind, &err)) {
        fprintf(stderr, "ringlm convert: --vocab: %s\n", err.c_str());
        return 1;
      }
      so.vocab = &vocab_data;
    }
    if (!ringlm::internal::conv::synthetic_model(synthetic, seed, so, &md, &err) ||
        (!chat.empty() && !ringlm::internal::conv::add_chat_specials(chat, &md, &err))) {
      fprintf(stderr, "ringlm convert: %s\n", err.c_str());
      return 1;
    }
    if (!opts.preset.empty()) ringlm::internal::conv::apply_quant_preset(opts.preset, &md, &opts.quant);
    opts.log = nullptr;  // random weights: quantization error lines say nothing useful
    ringlm::internal::conv::ConvertStats st;
    if (!ringlm::internal::conv::write_model_file(md, opts, out, &err, &st)) {
      fprintf(stderr, "ringlm convert: %s\n", err.c_str());
      return 1;
    }
    printf("wrote %s: synthetic %s, %u tensors, %.2f MiB; verified OK\n", out.c_str(),
           synthetic.c_str(), st.n_tensors, st.file_bytes / (1024.0 * 1024.0));
    return 0;
  }
  const ringlm::internal::conv::SourceKind kind = ringlm::internal::conv::detect_source(opts.source);
  if (!quiet) {
    printf("converting %s (%s) -> %s as %s\n", opts.source.c_str(),
           ringlm::internal::conv::source_kind_name(kind), out.c_str(),
           opts.keep              ? "keep (each tensor in the smallest exact encoding)"
           : !opts.preset.empty() ? opts.preset.c_str()
                                  : ringlm::internal::conv::dtype_name(opts.quant));
    fflush(stdout);
  }
  ringlm::internal::conv::ConvertStats st;
  std::string err;
  if (!ringlm::internal::conv::convert_to_file(opts, out, &err, &st)) {
    std::cout.flush();
    fprintf(stderr, "ringlm convert: %s\n", err.c_str());
    return 1;
  }
  std::cout.flush();
  printf("wrote %s: %u tensors, %.2f MiB (%llu bytes of weights), %u re-encoded, %u copied raw",
         out.c_str(), st.n_tensors, st.file_bytes / (1024.0 * 1024.0),
         static_cast<unsigned long long>(st.weight_bytes), st.n_quantized, st.n_raw_copied);
  if (st.n_quantized) {
    printf("; relative RMSE mean %.4f%%, max %.4f%% (%s)", st.mean_rel_rmse * 100.0,
           st.max_rel_rmse * 100.0, st.max_rel_rmse_tensor.c_str());
  }
  printf("; verified OK\n");
  // Always: what happened to the tensors, by source type (-v has it per tensor).
  printf("tensors: %s\n", ringlm::internal::conv::actions_summary(st).c_str());
  return 0;
}
