// The HTTP layer of `ringlm serve`: cpp-httplib's Server (Debian's libcpp-httplib-dev) with our
// own per-connection loop, so that every request is read under limits httplib 0.11 does not
// have by itself:
//  - one deadline for the whole request (request line, headers and body), not only per recv(),
//    so a client trickling a byte every few seconds (slowloris) is cut off;
//  - a cap on the bytes of the request line and headers together (httplib reads a header line of
//    any length before it checks it), and on the body's bytes as they arrive (httplib checks
//    Content-Length, but reads a chunked body, or one without a length, to its end);
//  - the socket of the request a worker thread is handling, so a handler can notice that its
//    client went away (there is no such call on httplib's Request in 0.11).
// Everything else (parsing, routing, chunked responses) is httplib's.
#ifndef RINGLM_TOOLS_SERVE_HTTP_SERVER_H_
#define RINGLM_TOOLS_SERVE_HTTP_SERVER_H_

#include <httplib.h>
#include <stddef.h>
#include <time.h>

struct HttpLimits {
  double request_timeout_s = 10;     // to read one request (line, headers, body), from its first byte
  double keep_alive_s = 5;           // idle time allowed between two requests of a connection
  size_t keep_alive_max = 100;       // requests per connection
  double write_timeout_s = 10;       // a client that reads nothing for this long is dropped
  size_t max_head_bytes = 16 << 10;  // request line + headers
  size_t max_body_bytes = 1 << 20;   // Content-Length above this: 413 before reading it
  size_t http_threads = 8;           // connections served at once (each one on a thread)
};

// Why reading the current request stopped early.
enum class ReadCut { kNone, kTimeout, kHeadTooLarge, kBodyTooLarge };

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const HttpLimits& limits);

  // The socket of the connection whose request this thread is handling, -1 outside a request.
  static int current_socket();
  // Called by the pre-routing handler: the head has been read, the body limit applies from now.
  static void head_done();
  // Whether (and why) reading this thread's current request was cut off (an error handler turns
  // it into 408 / 431 / 413).
  static ReadCut read_cut();
  // Marks the current request's connection for closing after its response (a request refused
  // before its body was read leaves that body unread).
  static void close_after_response();
  // Whether the peer of `fd` is still connected: false once it closed or reset the connection
  // (recv peeks 0 bytes or fails). Data waiting to be read (a pipelined request) counts as alive.
  static bool peer_alive(int fd);

 private:
  // Overrides httplib's loop (a virtual of httplib::Server): keep-alive wait, one request at a
  // time through process_request on our stream, then shutdown and close.
  bool process_and_close_socket(socket_t sock) override;

  HttpLimits limits_;
};

#endif  // RINGLM_TOOLS_SERVE_HTTP_SERVER_H_
