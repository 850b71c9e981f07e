// Helpers for the network benchmark clients. Plain C++ and POSIX on purpose:
// the clients must not run on shoal, so their cost is not shoal's.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

namespace netbench {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] inline void die(const std::string& what, int err = errno) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), std::strerror(err));
  std::exit(2);
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size())));
  return v[i];
}

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
inline long raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) die("getrlimit");
  rl.rlim_cur = rl.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) die("setrlimit");
  return static_cast<long>(rl.rlim_cur);
}

/// A `key:  value kB` field of /proc/<pid>/status (VmRSS, Threads, ...), -1 if absent.
inline long proc_status_field(int pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::size_t klen = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, klen, key) == 0 && line.size() > klen && line[klen] == ':') {
      return std::strtol(line.c_str() + klen + 1, nullptr, 10);
    }
  }
  return -1;
}

/// utime + stime of `pid`, in seconds.
inline double proc_cpu_seconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t rp = all.rfind(')');
  if (rp == std::string::npos) return -1;
  std::istringstream rest(all.substr(rp + 2));  // field 3 (state) onwards
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// Open file descriptors of `pid` (entries of /proc/<pid>/fd).
inline long proc_fd_count(int pid) {
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return -1;
  long n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

/// The accept queue of a listening TCP socket (connections the kernel has
/// completed and the server has not accepted yet), read through sock_diag:
/// cheap, unlike counting /proc/<pid>/fd (20 ms at 10,000 descriptors).
class ListenQueue {
 public:
  explicit ListenQueue(std::uint16_t port) : port_(port) {
    fd_ = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd_ < 0) die("socket(NETLINK_SOCK_DIAG)");
  }
  ~ListenQueue() { ::close(fd_); }
  ListenQueue(const ListenQueue&) = delete;
  ListenQueue& operator=(const ListenQueue&) = delete;

  /// Queued connections, or -1 if no IPv4 listener has the port.
  long length() {
    struct {
      nlmsghdr nlh;
      inet_diag_req_v2 r;
    } req{};
    req.nlh.nlmsg_len = sizeof req;
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.r.sdiag_family = AF_INET;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = 1u << 10;  // TCP_LISTEN
    req.r.id.idiag_sport = htons(port_);
    if (::send(fd_, &req, sizeof req, 0) < 0) die("sock_diag send");
    long found = -1;
    alignas(nlmsghdr) char buf[8192];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("sock_diag recv");
      const auto len = static_cast<std::size_t>(n);
      for (std::size_t off = 0; off + sizeof(nlmsghdr) <= len;) {  // NLMSG_OK/NEXT without their sign mix
        const auto* h = reinterpret_cast<const nlmsghdr*>(buf + off);
        if (h->nlmsg_len < sizeof(nlmsghdr) || off + h->nlmsg_len > len) break;
        if (h->nlmsg_type == NLMSG_DONE) return found;
        if (h->nlmsg_type == NLMSG_ERROR) die("sock_diag", EPROTO);
        const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
        if (m->id.idiag_sport == htons(port_)) found = static_cast<long>(m->idiag_rqueue);
        off += NLMSG_ALIGN(h->nlmsg_len);
      }
    }
  }

 private:
  int fd_ = -1;
  std::uint16_t port_;
};

/// "127.0.0.1:8080" -> sockaddr_in.
inline sockaddr_in parse_addr(const std::string& s) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  const std::size_t colon = s.rfind(':');
  if (colon == std::string::npos) die("address without a port: " + s, EINVAL);
  if (::inet_pton(AF_INET, s.substr(0, colon).c_str(), &a.sin_addr) != 1) die("bad IPv4 address: " + s, EINVAL);
  a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(s.substr(colon + 1))));
  return a;
}

/// The i-th client source address: 127.0.0.(first + i % count). Each one has
/// its own ephemeral-port range towards the server. The idle client uses
/// 127.0.0.2.., the churn client 127.0.0.32.., so the TIME_WAIT entries one
/// leaves behind never stand in the other's way.
inline sockaddr_in source_addr(std::size_t i, std::size_t count, std::uint32_t first = 2) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000000u + first + static_cast<std::uint32_t>(i % count));
  a.sin_port = 0;
  return a;
}

/// A TCP socket bound to `src` (port chosen at connect time, so the
/// 4-tuple, not the local port alone, has to be unique).
inline int bound_socket(const sockaddr_in& src, int flags) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&src), sizeof src) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

inline constexpr std::string_view kKeepAliveRequest = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
inline constexpr std::string_view kCloseRequest = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// Reads one HTTP/1.1 response (head + Content-Length body) from a blocking
/// socket. True if it is a complete "200".
inline bool read_response(int fd) {
  std::string buf;
  char tmp[4096];
  std::size_t need = std::string::npos;
  for (;;) {
    if (need == std::string::npos) {
      const std::size_t end = buf.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::size_t len = 0;
        const std::size_t cl = buf.find("Content-Length:");
        if (cl != std::string::npos && cl < end) len = std::strtoul(buf.c_str() + cl + 15, nullptr, 10);
        need = end + 4 + len;
      }
    }
    if (need != std::string::npos && buf.size() >= need) return buf.compare(0, 12, "HTTP/1.1 200") == 0;
    const ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(tmp, static_cast<std::size_t>(n));
  }
}

inline bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// ---- the reference servers (epoll_reference, uring_reference) ----------

/// Set by SIGINT or SIGTERM once install_stop_signals ran: a reference
/// server's loop ends.
inline volatile std::sig_atomic_t stop_requested = 0;
inline void install_stop_signals() {
  std::signal(SIGINT, [](int) { stop_requested = 1; });
  std::signal(SIGTERM, [](int) { stop_requested = 1; });
  std::signal(SIGPIPE, SIG_IGN);
}

/// A reference server's listening socket on `where` (127.0.0.1:port, port 0
/// picks one), SOCK_CLOEXEC | `flags`, backlog 1024; `port` gets the port.
inline int reference_listener(const char* where, int flags, unsigned& port) {
  sockaddr_in addr = parse_addr(where);
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  int one = 1;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("bind");
  if (::listen(ls, 1024) != 0) die("listen");
  socklen_t len = sizeof addr;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return ls;
}

/// examples/http_server's hello, as the reference servers answer it.
inline constexpr std::string_view kHelloResponse =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world!";
inline constexpr std::string_view kHelloCloseResponse =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\nHello, world!";

/// Appends to `out` the answer to each complete request at the front of
/// `in` and erases them, stopping after one that asks to close (true then).
/// An idle connection's `in` is left holding no buffer.
inline bool answer_requests(std::string& in, std::string& out) {
  std::size_t start = 0, end;
  bool close = false;
  while (!close && (end = in.find("\r\n\r\n", start)) != std::string::npos) {
    close = std::string_view(in).substr(start, end - start).find("Connection: close") != std::string_view::npos;
    out.append(close ? kHelloCloseResponse : kHelloResponse);
    start = end + 4;
  }
  in.erase(0, start);
  if (in.empty()) std::string().swap(in);
  return close;
}

}  // namespace netbench
