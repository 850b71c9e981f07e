// What the test process uses right now, from /proc and getrusage: open file
// descriptors, threads, resident memory, CPU time. Tests compare these
// before and after (leaks, idle cost), never against absolute numbers.
#pragma once

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace shoal::test {

/// Open file descriptors of this process.
inline int open_fds() {
  int n = -3;  // ".", ".." and the directory's own descriptor
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

/// A numeric "Key:  value" field of /proc/self/status (-1 if absent).
inline long proc_status(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == ':') {
      return std::stol(line.substr(key.size() + 1));
    }
  }
  return -1;
}
inline int thread_count() { return static_cast<int>(proc_status("Threads")); }
inline long rss_kib() { return proc_status("VmRSS"); }

/// User + system CPU time of this process, in seconds.
inline double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/// Raises the soft RLIMIT_NOFILE to at least `want` (capped by the hard
/// limit); returns the soft limit now in force.
inline rlim_t raise_fd_limit(rlim_t want) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

}  // namespace shoal::test
