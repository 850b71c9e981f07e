// The io_uring ABI by hand (linux/io_uring.h): no liburing, so the set-up
// goes through our seam and the library takes no new dependency.
#include "src/platform/platform.hpp"
#if defined(SHOAL_HAVE_URING)
#include "src/runtime/driver/io/uring/ring.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>

namespace shoal::detail::sys {
namespace {
int uring_setup_call(unsigned entries, io_uring_params* params) {
  return static_cast<int>(::syscall(__NR_io_uring_setup, entries, params));
}
int uring_register_call(int fd, unsigned opcode, void* arg, unsigned nr_args) {
  return static_cast<int>(::syscall(__NR_io_uring_register, fd, opcode, arg, nr_args));
}
int uring_disabled_sysctl_read() {
  std::FILE* f = std::fopen("/proc/sys/kernel/io_uring_disabled", "re");
  if (f == nullptr) return -1;
  int v = -1;
  if (std::fscanf(f, "%d", &v) != 1) v = -1;
  std::fclose(f);
  return v;
}
}  // namespace

UringSetup uring_setup = uring_setup_call;
UringRegister uring_register = uring_register_call;
UringDisabledSysctl uring_disabled_sysctl = uring_disabled_sysctl_read;

}  // namespace shoal::detail::sys

namespace shoal::detail::io {
namespace {

/// Why io_uring_setup said `err`, in the words an operator acts on.
std::string setup_failure(int err) {
  const std::string call = std::string("io_uring_setup failed (") + std::strerror(err) + ")";
  switch (err) {
    case ENOSYS:
      return call + ": this kernel has no io_uring (before 5.1, or built without CONFIG_IO_URING)";
    case EPERM:
      switch (sys::uring_disabled_sysctl()) {
        case 2:
          return call + ": the sysctl kernel.io_uring_disabled is 2 (io_uring off for every process)";
        case 1:
          return call + ": the sysctl kernel.io_uring_disabled is 1 and this process is not in kernel.io_uring_group";
        default:
          return call + ": refused by a seccomp filter (Docker's and Podman's default profiles refuse io_uring)";
      }
    case EINVAL:
      return call + ": this kernel does not know the set-up flags (IORING_SETUP_CQSIZE, IORING_SETUP_CLAMP; 5.6+)";
    default:
      return call;
  }
}

const char* feature_name(std::uint32_t bit) {
  switch (bit) {
    case IORING_FEAT_NODROP:
      return "IORING_FEAT_NODROP (5.5+)";
    case IORING_FEAT_EXT_ARG:
      return "IORING_FEAT_EXT_ARG (5.11+)";
    default:
      return "an io_uring feature";
  }
}

[[noreturn]] void fail(const char* what, int err) { throw std::system_error(err, std::generic_category(), what); }

int enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags, void* arg, std::size_t argsz) noexcept {
  const long r = ::syscall(__NR_io_uring_enter, fd, to_submit, min_complete, flags, arg, argsz);
  return r < 0 ? -errno : static_cast<int>(r);
}

}  // namespace

Ring::Ring(unsigned entries, unsigned cq_entries, std::initializer_list<std::uint8_t> ops, std::uint32_t features) {
  io_uring_params p{};
  // COOP_TASKRUN (5.19+): a completion the kernel finishes as task work on
  // a running submitter waits for that thread's next entry into the kernel
  // (a syscall, or the next tick) instead of an interrupt; a sleeping one
  // is still woken. The interrupts cost a quarter of the server's CPU: with
  // it, http_server c64 went from 97-103k to 127-147k req/s (docs/uring.md).
  p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | IORING_SETUP_COOP_TASKRUN;
  p.cq_entries = cq_entries;
  fd_ = sys::uring_setup(entries, &p);
  if (fd_ < 0 && errno == EINVAL) {  // before 5.19: without it
    p = io_uring_params{};
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
    p.cq_entries = cq_entries;
    fd_ = sys::uring_setup(entries, &p);
  }
  if (fd_ < 0) throw RingUnavailable(setup_failure(errno));
  try {
    for (std::uint32_t bit = 1; bit != 0; bit <<= 1) {
      if ((features & bit) != 0 && (p.features & bit) == 0) {
        throw RingUnavailable(std::string("this kernel's io_uring lacks ") + feature_name(bit));
      }
    }
    // Which opcodes this kernel has: a probe sized for every opcode we know.
    const std::size_t probe_size = sizeof(io_uring_probe) + IORING_OP_LAST * sizeof(io_uring_probe_op);
    auto probe_mem = std::make_unique<unsigned char[]>(probe_size);
    std::memset(probe_mem.get(), 0, probe_size);
    auto* probe = reinterpret_cast<io_uring_probe*>(probe_mem.get());
    if (sys::uring_register(fd_, IORING_REGISTER_PROBE, probe, IORING_OP_LAST) < 0) {
      throw RingUnavailable(std::string("io_uring_register(IORING_REGISTER_PROBE) failed (") + std::strerror(errno) +
                            "): this kernel cannot say which operations it has (5.6+)");
    }
    for (const std::uint8_t op : ops) {
      if (op > probe->last_op || (probe->ops[op].flags & IO_URING_OP_SUPPORTED) == 0) {
        throw RingUnavailable("this kernel's io_uring lacks operation " + std::to_string(op) +
                              " (linux/io_uring.h's IORING_OP_ numbering)");
      }
    }

    sq_map_len_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_map_len_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    const bool single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) sq_map_len_ = cq_map_len_ = std::max(sq_map_len_, cq_map_len_);
    sq_map_ = ::mmap(nullptr, sq_map_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQ_RING);
    if (sq_map_ == MAP_FAILED) {
      sq_map_ = nullptr;
      fail("shoal: mmap(io_uring submission ring)", errno);
    }
    if (single) {
      cq_map_ = sq_map_;
    } else {
      cq_map_ = ::mmap(nullptr, cq_map_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_CQ_RING);
      if (cq_map_ == MAP_FAILED) {
        cq_map_ = nullptr;
        fail("shoal: mmap(io_uring completion ring)", errno);
      }
    }
    sqes_len_ = p.sq_entries * sizeof(io_uring_sqe);
    void* sqes = ::mmap(nullptr, sqes_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQES);
    if (sqes == MAP_FAILED) fail("shoal: mmap(io_uring submission entries)", errno);
    sqes_ = static_cast<io_uring_sqe*>(sqes);
  } catch (...) {
    unmap();
    ::close(fd_);
    throw;
  }
  auto* sq = static_cast<unsigned char*>(sq_map_);
  sq_head_ = reinterpret_cast<unsigned*>(sq + p.sq_off.head);
  sq_tail_ = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
  sq_flags_ = reinterpret_cast<unsigned*>(sq + p.sq_off.flags);
  sq_array_ = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
  sq_mask_ = *reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
  sq_entries_ = p.sq_entries;
  sq_local_tail_ = *sq_tail_;
  auto* cq = static_cast<unsigned char*>(cq_map_);
  cq_head_ = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
  cq_tail_ = reinterpret_cast<unsigned*>(cq + p.cq_off.tail);
  cq_mask_ = *reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask);
  cqes_ = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);
}

Ring::~Ring() {
  unmap();
  ::close(fd_);
}

void Ring::unmap() noexcept {
  if (sqes_ != nullptr) ::munmap(sqes_, sqes_len_);
  if (cq_map_ != nullptr && cq_map_ != sq_map_) ::munmap(cq_map_, cq_map_len_);
  if (sq_map_ != nullptr) ::munmap(sq_map_, sq_map_len_);
  sqes_ = nullptr;
  cq_map_ = sq_map_ = nullptr;
}

io_uring_sqe* Ring::next_sqe() noexcept {
  // Acquire: the kernel has finished reading the entries it consumed.
  const unsigned head = std::atomic_ref<unsigned>(*sq_head_).load(std::memory_order_acquire);
  if (sq_local_tail_ - head >= sq_entries_) return nullptr;
  const unsigned index = sq_local_tail_ & sq_mask_;
  io_uring_sqe* sqe = &sqes_[index];
  std::memset(sqe, 0, sizeof *sqe);
  sq_array_[index] = index;
  ++sq_local_tail_;
  return sqe;
}

int Ring::submit() noexcept {
  // Release: the entries' contents happen before the kernel sees the tail.
  std::atomic_ref<unsigned>(*sq_tail_).store(sq_local_tail_, std::memory_order_release);
  // Everything the kernel has not consumed, so entries a failed enter left
  // (EAGAIN, EBUSY) go with the next one.
  const unsigned n = sq_local_tail_ - std::atomic_ref<unsigned>(*sq_head_).load(std::memory_order_acquire);
  if (n == 0) return 0;
  for (;;) {
    const int r = enter(fd_, n, 0, 0, nullptr, 0);
    if (r != -EINTR) return r;
  }
}

int Ring::wait(std::chrono::nanoseconds timeout) noexcept {
  __kernel_timespec ts{};
  io_uring_getevents_arg arg{};
  arg.sigmask_sz = _NSIG / 8;
  if (timeout.count() >= 0) {
    ts.tv_sec = timeout.count() / 1'000'000'000;
    ts.tv_nsec = timeout.count() % 1'000'000'000;
    arg.ts = reinterpret_cast<std::uint64_t>(&ts);
  }
  const int r = enter(fd_, 0, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg, sizeof arg);
  return r < 0 ? r : 0;
}

bool Ring::completions_pending() const noexcept {
  if (completions_ready()) return true;
  return (std::atomic_ref<unsigned>(*sq_flags_).load(std::memory_order_relaxed) & IORING_SQ_CQ_OVERFLOW) != 0;
}

}  // namespace shoal::detail::io

#endif  // SHOAL_HAVE_URING
