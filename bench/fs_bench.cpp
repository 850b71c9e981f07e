// Sequential file throughput through shoal::fs: write SIZE MiB with one
// write_at in flight (then fdatasync), read it back warm (page cache) and
// cold (after POSIX_FADV_DONTNEED), in 4 KiB and 1 MiB blocks; medians of
// SHOAL_BENCH_REPS (3). The path is the backend's: SHOAL_IO_BACKEND=uring
// submits to the ring, the default backend runs each call on the blocking
// pool. `sync` rows are plain pread/pwrite on the calling thread: the floor.
//   fs_bench DIR [SIZE_MiB [BLOCK_KiB]]   (no BLOCK_KiB: 4 and 1024)
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"

namespace {

using shoal::Task;
using shoal::bench::Clock;

struct Figures {
  double write = 0, warm = 0, cold = 0;              // seconds
  double write_cpu = 0, warm_cpu = 0, cold_cpu = 0;  // process CPU seconds (io_uring's workers included)
};

void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fdatasync(fd);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

Task<void> through_shoal(std::string path, std::size_t size, std::size_t block, Figures& out) {
  std::vector<std::byte> buf(block, std::byte{0x5a});
  {
    auto t0 = Clock::now();
    const double c0 = shoal::bench::cpu_seconds();
    shoal::fs::File f = co_await shoal::fs::File::create(path);
    for (std::size_t off = 0; off < size; off += block) co_await f.write_all(buf, off);
    co_await f.fdatasync();
    co_await f.close();
    out.write = shoal::bench::since(t0);
    out.write_cpu = shoal::bench::cpu_seconds() - c0;
  }
  for (double* slot : {&out.warm, &out.cold}) {
    if (slot == &out.cold) drop_cache(path);
    auto t0 = Clock::now();
    const double c0 = shoal::bench::cpu_seconds();
    shoal::fs::File f = co_await shoal::fs::File::open(path);
    for (std::size_t off = 0; off < size;) {
      const std::size_t n = co_await f.read_at(buf, off);
      if (n == 0) break;
      off += n;
    }
    *slot = shoal::bench::since(t0);
    (slot == &out.warm ? out.warm_cpu : out.cold_cpu) = shoal::bench::cpu_seconds() - c0;
  }
}

void plain(const std::string& path, std::size_t size, std::size_t block, Figures& out) {
  std::vector<char> buf(block, 0x5a);
  auto t0 = Clock::now();
  double c0 = shoal::bench::cpu_seconds();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  for (std::size_t off = 0; off < size; off += block) {
    if (::pwrite(fd, buf.data(), block, static_cast<off_t>(off)) != static_cast<ssize_t>(block)) std::abort();
  }
  (void)::fdatasync(fd);
  ::close(fd);
  out.write = shoal::bench::since(t0);
  out.write_cpu = shoal::bench::cpu_seconds() - c0;
  for (double* slot : {&out.warm, &out.cold}) {
    if (slot == &out.cold) drop_cache(path);
    t0 = Clock::now();
    c0 = shoal::bench::cpu_seconds();
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    for (std::size_t off = 0; off < size;) {
      const ssize_t n = ::pread(fd, buf.data(), block, static_cast<off_t>(off));
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    ::close(fd);
    *slot = shoal::bench::since(t0);
    (slot == &out.warm ? out.warm_cpu : out.cold_cpu) = shoal::bench::cpu_seconds() - c0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fs_bench DIR [SIZE_MiB [BLOCK_KiB]]\n");
    return 2;
  }
  const std::string path = std::string(argv[1]) + "/shoal-fs-bench.dat";
  const std::size_t size = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024) << 20;
  const int reps = shoal::bench::repetitions(3);
  const char* env = std::getenv("SHOAL_IO_BACKEND");
  const std::string backend = env != nullptr && *env != '\0' ? env : "default";
  shoal::Runtime rt;
  std::printf("%-6s %-8s %8s %8s %8s | %8s %8s %8s   (MiB/s | CPU s per GiB; median of %d, %zu MiB)\n", "path",
              "block", "write", "warm", "cold", "write", "warm", "cold", reps, size >> 20);
  std::vector<std::size_t> blocks = {std::size_t{4096}, std::size_t{1} << 20};
  if (argc > 3) blocks = {static_cast<std::size_t>(std::strtoull(argv[3], nullptr, 10)) << 10};
  for (const std::size_t block : blocks) {
    for (const bool through : {true, false}) {
      std::vector<double> w, rw, rc, cw, crw, crc;
      for (int i = 0; i < reps; ++i) {
        Figures f;
        if (through) {
          rt.block_on(through_shoal(path, size, block, f));
        } else {
          plain(path, size, block, f);
        }
        w.push_back(f.write);
        rw.push_back(f.warm);
        rc.push_back(f.cold);
        cw.push_back(f.write_cpu);
        crw.push_back(f.warm_cpu);
        crc.push_back(f.cold_cpu);
      }
      const double mib = static_cast<double>(size >> 20), gib = mib / 1024;
      using shoal::bench::median;
      std::printf("%-6s %-8s %8.0f %8.0f %8.0f | %8.2f %8.2f %8.2f\n", through ? (backend == "uring" ? "uring" : "pool") : "sync",
                  (std::to_string(block >> 10) + "KiB").c_str(), mib / median(w), mib / median(rw), mib / median(rc),
                  median(cw) / gib, median(crw) / gib, median(crc) / gib);
    }
  }
  ::unlink(path.c_str());
}
