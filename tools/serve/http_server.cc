#include "serve/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

// One connection's socket as an httplib::Stream. Reads are buffered (httplib reads the request
// line and headers one byte at a time) and bounded by the request's deadline and head budget.
class ConnStream : public httplib::Stream {
 public:
  ConnStream(int fd, const HttpLimits& limits) : fd_(fd), limits_(limits) {}

  // Starts the next request: a fresh deadline and head budget.
  void begin_request() {
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(limits_.request_timeout_s));
    consumed_ = 0;
    head_done_ = false;
    cut_ = ReadCut::kNone;
  }
  // Stops the connection after this request, as a cut does.
  void close_after() { cut_ = ReadCut::kBodyTooLarge; }
  ReadCut cut() const { return cut_; }
  void set_head_done() {
    head_done_ = true;
    head_bytes_ = consumed_;
  }
  bool buffered() const { return off_ < len_; }

  bool is_readable() const override { return buffered() || wait(POLLIN, remaining_ms()) > 0; }
  bool is_writable() const override {
    return wait(POLLOUT, static_cast<int>(limits_.write_timeout_s * 1000)) > 0 &&
           GuardedServer::peer_alive(fd_);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (!buffered()) {
      for (;;) {
        const int ms = remaining_ms();
        const int r = ms <= 0 ? 0 : wait(POLLIN, ms);
        if (r == 0) {  // the deadline passed: the request is cut off
          cut_ = ReadCut::kTimeout;
          return -1;
        }
        if (r < 0) return -1;
        const ssize_t n = ::recv(fd_, buf_, sizeof(buf_), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return n;
        off_ = 0;
        len_ = static_cast<size_t>(n);
        break;
      }
    }
    size_t n = len_ - off_;
    if (n > size) n = size;
    // The head budget counts what httplib consumed, not what arrived (the body may come in the
    // same packet as the headers).
    if (!head_done_ && consumed_ + n > limits_.max_head_bytes) {
      cut_ = ReadCut::kHeadTooLarge;
      return -1;
    }
    // The body: its limit plus room for chunked framing (hex sizes and CRLFs).
    if (head_done_ && consumed_ + n - head_bytes_ > limits_.max_body_bytes + limits_.max_body_bytes / 8 + 4096) {
      cut_ = ReadCut::kBodyTooLarge;
      return -1;
    }
    memcpy(ptr, buf_ + off_, n);
    off_ += n;
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    // Send first and wait only when the socket buffer is full: one system call per streamed
    // chunk in the common case.
    for (;;) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (wait(POLLOUT, static_cast<int>(limits_.write_timeout_s * 1000)) <= 0) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(true, &ip, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(false, &ip, &port);
  }
  socket_t socket() const override { return fd_; }

 private:
  int remaining_ms() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    return left.count() <= 0 ? 0 : static_cast<int>(left.count());
  }
  int wait(short events, int ms) const {
    struct pollfd p = {fd_, events, 0};
    for (;;) {
      const int r = ::poll(&p, 1, ms);
      if (r < 0 && errno == EINTR) continue;
      if (r > 0 && (p.revents & (POLLERR | POLLNVAL))) return -1;
      return r;
    }
  }
  void address(bool peer, std::string* ip, int* port) const {
    struct sockaddr_storage a;
    socklen_t len = sizeof(a);
    ip->clear();
    *port = 0;
    const int r = peer ? getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len)
                       : getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    if (r != 0) return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      *ip = host;
      *port = atoi(serv);
    }
  }

  int fd_;
  const HttpLimits& limits_;
  Clock::time_point deadline_{};
  size_t consumed_ = 0, head_bytes_ = 0;
  bool head_done_ = false;
  ReadCut cut_ = ReadCut::kNone;
  char buf_[4096];
  size_t off_ = 0, len_ = 0;
};

thread_local ConnStream* t_conn = nullptr;

}  // namespace

GuardedServer::GuardedServer(const HttpLimits& limits) : limits_(limits) {
  set_payload_max_length(limits.max_body_bytes);
  set_keep_alive_max_count(limits.keep_alive_max);
  // httplib's default sets SO_REUSEPORT on the listening socket: a second server on the same
  // port would then start "fine" and share the connections. SO_REUSEADDR alone lets a restarted
  // server bind again at once (past TIME_WAIT) and makes a port in use an error.
  set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const size_t n = limits.http_threads;
  new_task_queue = [n] { return new httplib::ThreadPool(n); };
}

int GuardedServer::current_socket() { return t_conn ? t_conn->socket() : -1; }

ReadCut GuardedServer::read_cut() { return t_conn ? t_conn->cut() : ReadCut::kNone; }

void GuardedServer::close_after_response() {
  if (t_conn) t_conn->close_after();
}

void GuardedServer::head_done() {
  if (t_conn) t_conn->set_head_done();
}

bool GuardedServer::peer_alive(int fd) {
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;
  if (n == 0) return false;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  // Streamed replies are many small writes: send each at once (no Nagle delay).
  const int one = 1;
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ConnStream strm(sock, limits_);
  t_conn = &strm;
  bool ok = false;
  for (size_t served = 0; served < limits_.keep_alive_max; ++served) {
    // Wait for the next request's first byte, in short polls so a server stop is noticed.
    bool ready = strm.buffered();
    const auto idle_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(limits_.keep_alive_s));
    while (!ready && svr_sock_ != INVALID_SOCKET && Clock::now() < idle_end) {
      struct pollfd p = {sock, POLLIN, 0};
      const int r = ::poll(&p, 1, 100);
      if (r < 0 && errno != EINTR) break;
      if (r > 0) {
        ready = !(p.revents & (POLLERR | POLLNVAL));
        if (!ready) break;
      }
    }
    if (!ready || svr_sock_ == INVALID_SOCKET) break;
    strm.begin_request();
    bool closed = false;
    ok = process_request(strm, served + 1 == limits_.keep_alive_max, closed, nullptr);
    // A request cut short (deadline, head too large) leaves the rest of its bytes unread: the
    // connection cannot be reused.
    if (!ok || closed || strm.cut() != ReadCut::kNone) break;
  }
  t_conn = nullptr;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}
