// ringlm embed: write a model file as a C source file (an aligned byte array), so a program can
// carry its model inside the binary and open it with no file I/O at all.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "commands.h"
#include "mapped_file.h"
#include "ringlm/ringlm.h"

namespace {

const char kUsage[] =
    "usage: ringlm embed MODEL -o OUT.c [--symbol NAME] [--header OUT.h] [--no-verify]\n"
    "\n"
    "Writes a C file defining the model bytes, 64-byte aligned as rlm_model_open requires:\n"
    "  const unsigned char NAME[] __attribute__((aligned(64))) = {...};\n"
    "  const size_t NAME_size = <bytes>;\n"
    "\n"
    "  -o, --output OUT.c   C source to write (written to a temporary file, then renamed)\n"
    "      --symbol NAME    array name (default: the output file name without extension, as a C\n"
    "                       identifier)\n"
    "      --header OUT.h   also write a header declaring NAME and NAME_size\n"
    "      --no-verify      embed even if rlm_model_open rejects the file\n"
    "  -h, --help           this help\n"
    "\n"
    "Link the .c into the program and pass NAME, NAME_size to rlm_model_open. For large models\n"
    "the assembler's .incbin is faster to build (docs/apps.md).\n";

std::string identifier_from(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') == std::string::npos
                                     ? 0
                                     : path.find_last_of('/') + 1);
  const size_t dot = base.find('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  std::string id;
  for (char c : base) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    id += ok ? c : '_';
  }
  if (id.empty() || (id[0] >= '0' && id[0] <= '9')) id = "model_" + id;
  return id;
}

bool valid_identifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

bool write_all(FILE* f, const char* p, size_t n) { return fwrite(p, 1, n, f) == n; }

// The bytes as decimal literals, 32 per line, through a 4-byte-per-value table into one
// reused 1 MiB buffer: ~0.03 s of CPU for a 10 MB model.
bool write_array(FILE* f, const unsigned char* data, size_t size) {
  char lit[256][4];
  unsigned char lit_len[256];
  for (int v = 0; v < 256; ++v) {
    char tmp[8];
    const int n = snprintf(tmp, sizeof tmp, "%d,", v);
    memcpy(lit[v], tmp, static_cast<size_t>(n));
    lit_len[v] = static_cast<unsigned char>(n);
  }
  std::vector<char> buf(1 << 20);
  size_t used = 0;
  for (size_t i = 0; i < size; ++i) {
    if (used + 8 > buf.size()) {
      if (!write_all(f, buf.data(), used)) return false;
      used = 0;
    }
    const unsigned char b = data[i];
    memcpy(&buf[used], lit[b], 4);  // copies 4, keeps lit_len
    used += lit_len[b];
    if ((i & 31) == 31) buf[used++] = '\n';
  }
  if (used && !write_all(f, buf.data(), used)) return false;
  return true;
}

}  // namespace

int cmd_embed(int argc, char** argv) {
  std::string model_path, out_path, symbol, header_path;
  bool verify = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto need = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "ringlm embed: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      return 0;
    } else if (a == "-o" || a == "--output") {
      if (!(v = need("-o"))) return 2;
      out_path = v;
    } else if (a == "--symbol") {
      if (!(v = need("--symbol"))) return 2;
      symbol = v;
    } else if (a == "--header") {
      if (!(v = need("--header"))) return 2;
      header_path = v;
    } else if (a == "--no-verify") {
      verify = false;
    } else if (!a.empty() && a[0] == '-') {
      fprintf(stderr, "ringlm embed: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    } else if (model_path.empty()) {
      model_path = a;
    } else {
      fprintf(stderr, "ringlm embed: more than one model given ('%s')\n", a.c_str());
      return 2;
    }
  }
  if (model_path.empty() || out_path.empty()) {
    fprintf(stderr, "ringlm embed: need MODEL and -o OUT.c\n%s", kUsage);
    return 2;
  }
  if (symbol.empty()) symbol = identifier_from(out_path);
  if (!valid_identifier(symbol)) {
    fprintf(stderr, "ringlm embed: '%s' is not a C identifier\n", symbol.c_str());
    return 2;
  }

  MappedFile file;
  std::string err;
  if (!file.open(model_path, &err)) {
    fprintf(stderr, "ringlm embed: %s\n", err.c_str());
    return 1;
  }
  if (verify) {
    rlm_model model;
    const rlm_status st = rlm_model_open(file.data(), file.size(), &model);
    if (st != RLM_OK) {
      fprintf(stderr, "ringlm embed: %s is not a valid model: %s: %s (--no-verify to embed anyway)\n",
              model_path.c_str(), rlm_status_string(st), rlm_model_error(&model));
      return 1;
    }
  }

  const size_t size = file.size();
  const std::string tmp = out_path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "wb");
  if (!f) {
    fprintf(stderr, "ringlm embed: cannot write '%s': %s\n", tmp.c_str(), strerror(errno));
    return 1;
  }
  std::string base = model_path.substr(model_path.find_last_of('/') == std::string::npos
                                           ? 0
                                           : model_path.find_last_of('/') + 1);
  for (char& c : base) {
    if (c == '*' || c == '/') c = '_';  // keep the comment a comment
  }
  std::string head;
  head += "/* Generated by `ringlm embed` from " + base + " (" + std::to_string(size) +
          " bytes). Do not edit. */\n";
  head += "#include <stddef.h>\n\n";
  head += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n";
  head += "extern const unsigned char " + symbol + "[];\n";
  head += "extern const size_t " + symbol + "_size;\n";
  head += "#ifdef __cplusplus\n}\n#endif\n\n";
  head += "/* 64-byte aligned: rlm_model_open uses the bytes in place. */\n";
  head += "#if defined(_MSC_VER)\n__declspec(align(64))\n#endif\n";
  head += "const unsigned char " + symbol + "[]\n";
  head += "#if !defined(_MSC_VER)\n    __attribute__((aligned(64)))\n#endif\n";
  head += "    = {\n";
  std::string tail = "};\nconst size_t " + symbol + "_size = " + std::to_string(size) + "u;\n";
  bool ok = write_all(f, head.data(), head.size()) &&
            write_array(f, static_cast<const unsigned char*>(file.data()), size) &&
            write_all(f, tail.data(), tail.size());
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp.c_str(), out_path.c_str()) != 0) {
    fprintf(stderr, "ringlm embed: cannot write '%s': %s\n", out_path.c_str(), strerror(errno));
    unlink(tmp.c_str());
    return 1;
  }
  if (!header_path.empty()) {
    FILE* h = fopen(header_path.c_str(), "wb");
    std::string guard = "RINGLM_EMBED_" + symbol + "_H_";
    for (char& c : guard) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    const std::string text =
        "/* Generated by `ringlm embed`. Do not edit. */\n#ifndef " + guard + "\n#define " +
        guard + "\n#include <stddef.h>\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n" +
        "extern const unsigned char " + symbol + "[]; /* 64-byte aligned model bytes */\n" +
        "extern const size_t " + symbol + "_size;\n#ifdef __cplusplus\n}\n#endif\n#endif\n";
    if (!h || !write_all(h, text.data(), text.size()) || fclose(h) != 0) {
      fprintf(stderr, "ringlm embed: cannot write '%s'\n", header_path.c_str());
      return 1;
    }
  }
  fprintf(stderr, "ringlm embed: %s -> %s (%s, %zu bytes)\n", model_path.c_str(),
          out_path.c_str(), symbol.c_str(), size);
  return 0;
}
