// ringlm embed: write a model file as a C source file (an aligned byte array), so a program can
// carry its model inside the binary and open it with no file I/O at all.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "commands.h"
#include "convert/output_file.h"
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
    "  -o, --output OUT.c   C source to write (written to a temporary file, then renamed; an\n"
    "                       existing OUT.c must be a writable regular file: directories,\n"
    "                       devices, FIFOs and symbolic links are refused, never replaced)\n"
    "      --symbol NAME    array name, a C identifier that is not a C/C++ keyword (default:\n"
    "                       the output file name without extension, made an identifier)\n"
    "      --header OUT.h   also write a header declaring NAME and NAME_size (same rules as -o)\n"
    "      --no-verify      embed even if rlm_model_open rejects the file\n"
    "  -h, --help           this help\n"
    "\n"
    "Link the .c into the program and pass NAME, NAME_size to rlm_model_open. For large models\n"
    "the assembler's .incbin is faster to build (docs/apps.md).\n";

bool is_keyword(const std::string& s);

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
  if (id.empty() || (id[0] >= '0' && id[0] <= '9') || is_keyword(id)) id = "model_" + id;
  return id;
}

// C keywords (C89 to C23, including the _Xxx ones) and C++ keywords: the generated .c and .h
// declare NAME and must compile as C, and the header (which has an extern "C" block) as C++.
bool is_keyword(const std::string& s) {
  static const char* const kKeywords[] = {
      // C
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
      "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
      "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
      "union", "unsigned", "void", "volatile", "while", "_Alignas", "_Alignof", "_Atomic",
      "_BitInt", "_Bool", "_Complex", "_Decimal128", "_Decimal32", "_Decimal64", "_Generic",
      "_Imaginary", "_Noreturn", "_Static_assert", "_Thread_local", "alignas", "alignof", "bool",
      "constexpr", "false", "nullptr", "static_assert", "thread_local", "true", "typeof",
      "typeof_unqual",
      // C++ (beyond the above)
      "and", "and_eq", "asm", "bitand", "bitor", "catch", "char8_t", "char16_t", "char32_t",
      "class", "co_await", "co_return", "co_yield", "compl", "concept", "consteval", "constinit",
      "const_cast", "decltype", "delete", "dynamic_cast", "explicit", "export", "friend",
      "mutable", "namespace", "new", "noexcept", "not", "not_eq", "operator", "or", "or_eq",
      "private", "protected", "public", "reinterpret_cast", "requires", "static_cast", "template",
      "this", "throw", "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor",
      "xor_eq",
      // The generated file's own names: a macro or type the .c itself uses.
      "size_t", "__attribute__", "__declspec"};
  for (const char* k : kKeywords) {
    if (s == k) return true;
  }
  return false;
}

// Why `s` cannot be the array name, or "" when it can: a C identifier ([A-Za-z_][A-Za-z0-9_]*)
// that is not a C or C++ keyword.
std::string identifier_problem(const std::string& s) {
  if (s.empty()) return "is empty";
  if (s[0] >= '0' && s[0] <= '9') return "starts with a digit";
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
      return "is not a C identifier (letters, digits and '_' only)";
    }
  }
  if (is_keyword(s)) return "is a C or C++ keyword";
  return "";
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
  if (const std::string why = identifier_problem(symbol); !why.empty()) {
    fprintf(stderr, "ringlm embed: --symbol '%s' %s; the generated C would not compile\n",
            symbol.c_str(), why.c_str());
    return 2;
  }
  // Refuse a non-regular, symlinked or read-only target before reading the model (the same
  // policy as `ringlm convert -o`: convert/output_file.h).
  for (const std::string* p : {&out_path, &header_path}) {
    std::string err;
    if (!p->empty() && !ringlm::internal::conv::check_output_target(*p, &err)) {
      fprintf(stderr, "ringlm embed: %s\n", err.c_str());
      return 1;
    }
  }
  if (!header_path.empty() &&
      (header_path == out_path || ringlm::internal::conv::same_file(header_path, out_path))) {
    fprintf(stderr, "ringlm embed: --header and -o name the same file\n");
    return 2;
  }
  for (const std::string* p : {&out_path, &header_path}) {
    if (!p->empty() && ringlm::internal::conv::same_file(model_path, *p)) {
      fprintf(stderr, "ringlm embed: '%s' is the model itself; refusing to replace it\n",
              p->c_str());
      return 2;
    }
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
  // Both files go through a temporary file next to the target, renamed into place (and removed
  // on failure or SIGINT / SIGTERM): a target is never left half-written.
  ringlm::internal::conv::TempOutput tmp;
  if (!tmp.create(out_path, &err)) {
    fprintf(stderr, "ringlm embed: %s\n", err.c_str());
    return 1;
  }
  FILE* f = fdopen(dup(tmp.fd()), "wb");  // fclose closes the copy; commit() syncs and closes
  if (!f) {
    fprintf(stderr, "ringlm embed: cannot write '%s': %s\n", tmp.path().c_str(), strerror(errno));
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
  if (!ok) err = "cannot write '" + tmp.path() + "': " + strerror(errno);
  if (!ok || !tmp.commit(&err)) {
    fprintf(stderr, "ringlm embed: %s\n", err.c_str());
    return 1;
  }
  if (!header_path.empty()) {
    std::string guard = "RINGLM_EMBED_" + symbol + "_H_";
    for (char& c : guard) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    const std::string text =
        "/* Generated by `ringlm embed`. Do not edit. */\n#ifndef " + guard + "\n#define " +
        guard + "\n#include <stddef.h>\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n" +
        "extern const unsigned char " + symbol + "[]; /* 64-byte aligned model bytes */\n" +
        "extern const size_t " + symbol + "_size;\n#ifdef __cplusplus\n}\n#endif\n#endif\n";
    ringlm::internal::conv::TempOutput htmp;
    bool hok = htmp.create(header_path, &err);
    size_t off = 0;
    while (hok && off < text.size()) {
      const ssize_t w = write(htmp.fd(), text.data() + off, text.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        err = "cannot write '" + htmp.path() + "': " + strerror(errno);
        hok = false;
        break;
      }
      off += static_cast<size_t>(w);
    }
    if (!hok || !htmp.commit(&err)) {
      fprintf(stderr, "ringlm embed: %s\n", err.c_str());
      return 1;
    }
  }
  fprintf(stderr, "ringlm embed: %s -> %s (%s, %zu bytes)\n", model_path.c_str(),
          out_path.c_str(), symbol.c_str(), size);
  return 0;
}
