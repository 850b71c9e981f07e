// Idle connections: opens N connections to an HTTP server in another process
// and leaves them idle, then reads the server's memory and threads, probes
// the latency of one request on a fresh connection, and checks that none of
// the idle ones was cut. Plain blocking sockets, not shoal.
//
//   net_idle_client <server ip:port> <server pid> <count | max> [probes=20] [sources=8] [hold_s=0] [warm=0]
//
// `max` opens as many as the fd limit allows (the hard RLIMIT_NOFILE minus
// 100 for both processes' other descriptors). Source addresses are
// 127.0.0.2 .. 127.0.0.(1 + sources), so ephemeral ports do not run out.
// hold_s keeps the connections open that much longer before closing them
// (to inspect the server by hand). warm=1 sends one keep-alive request on
// each connection (and reads the response) before it goes idle, so the
// figure includes whatever a handler keeps after serving a request.
// The last line is "RESULT key=value ..." for bench/net/run.sh.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/net/net_util.hpp"

namespace {

using namespace netbench;

struct Probe {
  double connect_us;  // connect() returned
  double total_us;    // connect + request + full response
};

/// One request on a fresh connection (keep-alive request, then close).
Probe probe(const sockaddr_in& server, std::size_t source_count, std::size_t i) {
  const auto t0 = Clock::now();
  const int fd = bound_socket(source_addr(i, source_count), 0);
  if (fd < 0) die("probe: socket/bind");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) die("probe: connect");
  const double c = since(t0) * 1e6;
  if (!write_all(fd, kKeepAliveRequest)) die("probe: write");
  if (!read_response(fd)) die("probe: no complete 200 response", EPROTO);
  const double t = since(t0) * 1e6;
  ::close(fd);
  return {c, t};
}

/// `n` probes, `gap_ms` apart (0: back to back, everything stays warm; 10:
/// the server parks between them and each probe pays its wake-up, which on
/// this VM includes waking an idle vCPU).
std::vector<Probe> probes(const sockaddr_in& server, std::size_t source_count, int n, int gap_ms) {
  std::vector<Probe> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(probe(server, source_count, static_cast<std::size_t>(i)));
    if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  }
  return out;
}

double med_total(const std::vector<Probe>& v) {
  std::vector<double> x;
  for (auto& p : v) x.push_back(p.total_us);
  return median(x);
}
double med_connect(const std::vector<Probe>& v) {
  std::vector<double> x;
  for (auto& p : v) x.push_back(p.connect_us);
  return median(x);
}
double max_total(const std::vector<Probe>& v) {
  double m = 0;
  for (auto& p : v) m = std::max(m, p.total_us);
  return m;
}

/// Waits until the server holds `target` descriptors or more; false on timeout.
bool wait_fds_at_least(int pid, long target, double timeout_s) {
  const auto t0 = Clock::now();
  while (proc_fd_count(pid) < target) {
    if (since(t0) > timeout_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool wait_fds_at_most(int pid, long target, double timeout_s) {
  const auto t0 = Clock::now();
  while (proc_fd_count(pid) > target) {
    if (since(t0) > timeout_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s <server ip:port> <server pid> <count|max> [probes=20] [sources=8] [hold_s=0] [warm=0]\n",
                 argv[0]);
    return 2;
  }
  const sockaddr_in server = parse_addr(argv[1]);
  const int pid = std::atoi(argv[2]);
  const long limit = raise_fd_limit();
  const std::string count_arg = argv[3];
  const std::size_t count =
      count_arg == "max" ? static_cast<std::size_t>(limit - 100) : std::strtoul(count_arg.c_str(), nullptr, 10);
  const int nprobes = argc > 4 ? std::atoi(argv[4]) : 20;
  const std::size_t sources = argc > 5 ? std::strtoul(argv[5], nullptr, 10) : 8;
  const double hold_s = argc > 6 ? std::atof(argv[6]) : 0;
  const bool warm = argc > 7 && std::atoi(argv[7]) != 0;
  if (proc_fd_count(pid) < 0) die("cannot read /proc/" + std::to_string(pid) + "/fd", ESRCH);

  // Baseline: a warm server with no connections.
  const auto base_hot = probes(server, sources, nprobes, 0);
  const auto base_probes = probes(server, sources, nprobes, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long fds0 = proc_fd_count(pid);
  const long rss0 = proc_status_field(pid, "VmRSS");
  const long threads0 = proc_status_field(pid, "Threads");

  // Open them all. Blocking connects, kept at most 256 ahead of the
  // server's accepts (its accept queue, read through sock_diag) so the listen
  // backlog never overflows: a dropped handshake would cost a 1 s
  // retransmission and distort the time.
  ListenQueue queue(ntohs(server.sin_port));
  if (queue.length() < 0) die("no IPv4 listener on the server's port", ENOENT);
  std::vector<int> fds;
  fds.reserve(count);
  const auto t_open = Clock::now();
  for (std::size_t i = 0; i < count; ++i) {
    if (i % 64 == 0) {
      const auto t_wait = Clock::now();
      while (queue.length() > 256) {
        if (since(t_wait) > 10) die("the server stopped accepting", ETIMEDOUT);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    const int fd = bound_socket(source_addr(i, sources), 0);
    if (fd < 0) die("socket/bind #" + std::to_string(i));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) {
      die("connect #" + std::to_string(i));
    }
    if (warm && (!write_all(fd, kKeepAliveRequest) || !read_response(fd))) {
      die("warm-up request #" + std::to_string(i), EPROTO);
    }
    fds.push_back(fd);
  }
  const double connected_s = since(t_open);
  {
    const auto t_wait = Clock::now();
    while (queue.length() > 0) {
      if (since(t_wait) > 30) die("the server stopped accepting", ETIMEDOUT);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  const double accepted_s = since(t_open);
  if (!wait_fds_at_least(pid, fds0 + static_cast<long>(count), 30)) {
    die("the server holds only " + std::to_string(proc_fd_count(pid) - fds0) + " of " + std::to_string(count) +
            " connections",
        ETIMEDOUT);
  }

  // Let every handler reach its idle wait, then measure.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const long rss1 = proc_status_field(pid, "VmRSS");
  const long threads1 = proc_status_field(pid, "Threads");
  const double cpu0 = proc_cpu_seconds(pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const double idle_cpu_pct = (proc_cpu_seconds(pid) - cpu0) * 100.0;
  const auto idle_hot = probes(server, sources, nprobes, 0);
  const auto idle_probes = probes(server, sources, nprobes, 10);

  // None may have been cut: an idle socket must not be readable (no EOF, no reset).
  std::vector<pollfd> pfds(fds.size());
  for (std::size_t i = 0; i < fds.size(); ++i) pfds[i] = {fds[i], POLLIN | POLLRDHUP, 0};
  const int cut = ::poll(pfds.data(), pfds.size(), 0);
  const double elapsed_s = since(t_open);

  if (hold_s > 0) {
    std::printf("holding %zu idle connections for %.1f s\n", count, hold_s);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(hold_s));
  }

  // Close them all and see what the server gives back.
  const auto t_close = Clock::now();
  for (int fd : fds) ::close(fd);
  const bool drained = wait_fds_at_most(pid, fds0, 30);
  const double close_s = since(t_close);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long rss2 = proc_status_field(pid, "VmRSS");

  const double per_conn = static_cast<double>(rss1 - rss0) * 1024.0 / static_cast<double>(count);
  std::printf("idle: %zu connections from %zu source addresses (fd limit %ld)%s\n", count, sources, limit,
              warm ? ", each after one request" : "");
  std::printf("  open: all connected in %.3f s, all accepted in %.3f s (%.0f conn/s)\n", connected_s, accepted_s,
              static_cast<double>(count) / accepted_s);
  std::printf("  server RSS %ld -> %ld KiB: %+.0f B per idle connection; threads %ld -> %ld\n", rss0, rss1, per_conn,
              threads0, threads1);
  std::printf("  server CPU while idle: %.2f%% of a core over 1 s\n", idle_cpu_pct);
  std::printf("  one request on a fresh connection, %d probes 10 ms apart: median %.0f us (connect %.0f us), max %.0f us;"
              " with no other connections %.0f us (connect %.0f us)\n",
              nprobes, med_total(idle_probes), med_connect(idle_probes), max_total(idle_probes), med_total(base_probes),
              med_connect(base_probes));
  std::printf("  the same back to back: median %.0f us (connect %.0f us); with no other connections %.0f us\n",
              med_total(idle_hot), med_connect(idle_hot), med_total(base_hot));
  std::printf("  idle connections cut by the server: %d (all were idle for %.1f s)\n", cut, elapsed_s);
  std::printf("  closed all: server back to its descriptors in %.3f s%s; RSS then %ld KiB\n", close_s,
              drained ? "" : " (TIMED OUT)", rss2);
  std::printf("RESULT count=%zu rss0_kib=%ld rss1_kib=%ld per_conn_b=%.0f threads=%ld open_s=%.3f accepted_s=%.3f "
              "probe_us=%.0f probe_connect_us=%.0f probe_max_us=%.0f probe_base_us=%.0f probe_hot_us=%.0f probe_base_hot_us=%.0f idle_cpu_pct=%.2f cut=%d "
              "rss_after_close_kib=%ld warm=%d\n",
              count, rss0, rss1, per_conn, threads1, connected_s, accepted_s, med_total(idle_probes),
              med_connect(idle_probes), max_total(idle_probes), med_total(base_probes), med_total(idle_hot),
              med_total(base_hot), idle_cpu_pct, cut, rss2, warm ? 1 : 0);
  return cut == 0 && drained ? 0 : 1;
}
