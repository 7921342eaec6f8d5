// `ringlm serve`: routes, the generation loop of a request, metrics. cmd_serve.cc parses the
// flags, opens the model and the slots, and calls run_server.
#ifndef RINGLM_TOOLS_SERVE_SERVER_H_
#define RINGLM_TOOLS_SERVE_SERVER_H_

#include <stdint.h>

#include <string>

#include "serve/http_server.h"
#include "serve/openai_api.h"
#include "serve/slots.h"

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (printed)
  std::string api_key;           // "" = no authentication
  uint32_t n_batch = 64;         // the sessions' n_batch (prefix reuse keeps chunks aligned to it)
  bool quiet = false;            // no per-request log lines
  HttpLimits http;
};

// Blocks SIGINT and SIGTERM in the calling thread (threads started after inherit it: the
// signals then wait for run_server's sigwait instead of killing the process) and ignores
// SIGPIPE. Call before starting any thread (the slots' watchdog and session workers).
void block_stop_signals();

// Serves until SIGINT / SIGTERM. Prints "ringlm serve: listening on http://HOST:PORT" on stdout
// once the socket is bound. Returns the process exit status.
int run_server(const ServeOptions& opt, const ServeModel& model, SlotPool* pool);

#endif  // RINGLM_TOOLS_SERVE_SERVER_H_
