// The io_uring ceiling for the HTTP and churn rows: a hand-written,
// single-threaded "hello" server in plain C++ on raw io_uring (no shoal, no
// liburing), built the way issue 44's server path would be: one ring with
// SINGLE_ISSUER|DEFER_TASKRUN, a multishot accept, a multishot receive per
// connection into a provided buffer ring (an idle connection holds no
// buffer), and sends, closes and re-arms queued as entries and handed over
// with the loop's one io_uring_enter (submit and wait). Answers requests as
// net_epoll_reference does; measured beside it (compare.sh's epoll_st) it
// says what the ring can give on this kernel before shoal is built for it
// (docs/uring.md, "The ceiling").
//
//   net_uring_reference [127.0.0.1:port]   (port 0 picks one; prints "listening on ...")
// SIGINT/SIGTERM stop it. Exits 3 where io_uring (or a feature) is refused.
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bench/net/net_util.hpp"

namespace {

[[noreturn]] void unavailable(const char* what, int err) {
  std::fprintf(stderr, "net_uring_reference: %s: %s\n", what, std::strerror(err));
  std::exit(3);
}

// The rings, mapped; the owner is the one thread.
class Ring {
 public:
  Ring(unsigned entries, unsigned cq_entries) {
    io_uring_params p{};
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    p.cq_entries = cq_entries;
    fd_ = static_cast<int>(::syscall(__NR_io_uring_setup, entries, &p));
    if (fd_ < 0) unavailable("io_uring_setup (SINGLE_ISSUER|DEFER_TASKRUN: 6.1+)", errno);
    const std::size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    const std::size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    const std::size_t len = sq_len > cq_len ? sq_len : cq_len;  // IORING_FEAT_SINGLE_MMAP
    if ((p.features & IORING_FEAT_SINGLE_MMAP) == 0) unavailable("IORING_FEAT_SINGLE_MMAP", EINVAL);
    auto* m = static_cast<unsigned char*>(
        ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQ_RING));
    sqes_ = static_cast<io_uring_sqe*>(::mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe), PROT_READ | PROT_WRITE,
                                              MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQES));
    if (m == MAP_FAILED || sqes_ == MAP_FAILED) netbench::die("mmap");
    sq_head_ = reinterpret_cast<unsigned*>(m + p.sq_off.head);
    sq_tail_ = reinterpret_cast<unsigned*>(m + p.sq_off.tail);
    sq_array_ = reinterpret_cast<unsigned*>(m + p.sq_off.array);
    sq_mask_ = *reinterpret_cast<unsigned*>(m + p.sq_off.ring_mask);
    sq_entries_ = p.sq_entries;
    local_tail_ = *sq_tail_;
    cq_head_ = reinterpret_cast<unsigned*>(m + p.cq_off.head);
    cq_tail_ = reinterpret_cast<unsigned*>(m + p.cq_off.tail);
    cq_mask_ = *reinterpret_cast<unsigned*>(m + p.cq_off.ring_mask);
    cqes_ = reinterpret_cast<io_uring_cqe*>(m + p.cq_off.cqes);
  }
  int fd() const { return fd_; }
  io_uring_sqe* sqe() {
    if (local_tail_ - std::atomic_ref<unsigned>(*sq_head_).load(std::memory_order_acquire) >= sq_entries_) {
      enter(0);  // full: hand it over first
    }
    const unsigned i = local_tail_++ & sq_mask_;
    sq_array_[i] = i;
    std::memset(&sqes_[i], 0, sizeof sqes_[i]);
    return &sqes_[i];
  }
  /// Submits what is queued and waits for `min` completions (200 ms at most).
  void enter(unsigned min) {
    std::atomic_ref<unsigned>(*sq_tail_).store(local_tail_, std::memory_order_release);
    const unsigned n = local_tail_ - std::atomic_ref<unsigned>(*sq_head_).load(std::memory_order_acquire);
    __kernel_timespec ts{0, 200'000'000};
    io_uring_getevents_arg arg{};
    arg.ts = reinterpret_cast<std::uint64_t>(&ts);
    const unsigned flags = min != 0 ? IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG : 0;
    const long r = ::syscall(__NR_io_uring_enter, fd_, n, min, flags, min != 0 ? &arg : nullptr,
                             min != 0 ? sizeof arg : 0);
    if (r < 0 && errno != ETIME && errno != EINTR && errno != EBUSY) netbench::die("io_uring_enter");
  }
  template <class F>
  void reap(F&& f) {
    unsigned head = *cq_head_;
    const unsigned tail = std::atomic_ref<unsigned>(*cq_tail_).load(std::memory_order_acquire);
    for (; head != tail; ++head) f(cqes_[head & cq_mask_]);
    std::atomic_ref<unsigned>(*cq_head_).store(head, std::memory_order_release);
  }

 private:
  int fd_;
  io_uring_sqe* sqes_;
  unsigned *sq_head_, *sq_tail_, *sq_array_, sq_mask_, sq_entries_, local_tail_;
  unsigned *cq_head_, *cq_tail_, cq_mask_;
  io_uring_cqe* cqes_;
};

// A provided buffer ring (group 0): the kernel picks a buffer as data
// arrives; each is given back once its bytes are parsed.
class Buffers {
 public:
  static constexpr unsigned kCount = 1024, kSize = 4096;
  explicit Buffers(int ring_fd) {
    ring_ = static_cast<io_uring_buf_ring*>(::mmap(nullptr, kCount * sizeof(io_uring_buf), PROT_READ | PROT_WRITE,
                                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    data_ = static_cast<char*>(::mmap(nullptr, std::size_t{kCount} * kSize, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (ring_ == MAP_FAILED || data_ == MAP_FAILED) netbench::die("mmap");
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uint64_t>(ring_);
    reg.ring_entries = kCount;
    reg.bgid = 0;
    if (::syscall(__NR_io_uring_register, ring_fd, IORING_REGISTER_PBUF_RING, &reg, 1) != 0) {
      unavailable("IORING_REGISTER_PBUF_RING (5.19+)", errno);
    }
    for (unsigned i = 0; i < kCount; ++i) give_back(i);
    publish();
  }
  const char* at(unsigned id) const { return data_ + std::size_t{id} * kSize; }
  void give_back(unsigned id) {
    // Not ring_->bufs: in C++ the header's flexible-array macro puts an
    // empty struct (one byte) before it, so `bufs` lands 8 bytes late.
    io_uring_buf& b = reinterpret_cast<io_uring_buf*>(ring_)[tail_ & (kCount - 1)];
    b.addr = reinterpret_cast<std::uint64_t>(at(id));
    b.len = kSize;
    b.bid = static_cast<std::uint16_t>(id);
    ++tail_;
  }
  void publish() { std::atomic_ref<std::uint16_t>(ring_->tail).store(tail_, std::memory_order_release); }

 private:
  io_uring_buf_ring* ring_;
  char* data_;
  std::uint16_t tail_ = 0;
};

// User data: what, a connection's generation, its fd.
enum Kind : std::uint64_t { kAccept = 1, kRecv = 2, kSend = 3, kClose = 4, kCancel = 5 };
std::uint64_t tag(Kind k, std::uint32_t gen, int fd) {
  return (std::uint64_t{k} << 60) | (std::uint64_t{gen & 0xfffffff} << 32) | static_cast<std::uint32_t>(fd);
}

struct Conn {
  std::uint32_t gen = 0;
  bool open = false;
  bool closing = false;  // a close is queued (after its sends)
  unsigned sends = 0;    // in flight
  std::string partial;   // unparsed bytes (empty, no buffer, while idle)
  std::string out;       // the bytes of the send in flight (responses are copied: pipelined ones differ)
};

}  // namespace

int main(int argc, char** argv) {
  using namespace netbench;
  raise_fd_limit();
  install_stop_signals();
  unsigned port = 0;
  const int ls = reference_listener(argc > 1 ? argv[1] : "127.0.0.1:0", 0, port);

  Ring ring(4096, 65536);
  Buffers bufs(ring.fd());
  std::vector<Conn> conns;
  auto arm_accept = [&] {
    io_uring_sqe* s = ring.sqe();
    s->opcode = IORING_OP_ACCEPT;
    s->fd = ls;
    s->accept_flags = SOCK_CLOEXEC;
    s->ioprio = IORING_ACCEPT_MULTISHOT;
    s->user_data = tag(kAccept, 0, ls);
  };
  auto arm_recv = [&](int fd) {
    io_uring_sqe* s = ring.sqe();
    s->opcode = IORING_OP_RECV;
    s->fd = fd;
    s->ioprio = IORING_RECV_MULTISHOT;
    s->flags = IOSQE_BUFFER_SELECT;
    s->buf_group = 0;
    s->user_data = tag(kRecv, conns[static_cast<std::size_t>(fd)].gen, fd);
  };
  // The multishot receive holds the socket: cancel it, then close (linked,
  // so the close runs once the cancel has been issued).
  auto close_conn = [&](int fd) {
    Conn& c = conns[static_cast<std::size_t>(fd)];
    if (!c.open) return;
    c.open = false;
    std::string().swap(c.partial);
    std::string().swap(c.out);
    io_uring_sqe* s = ring.sqe();
    s->opcode = IORING_OP_ASYNC_CANCEL;
    s->fd = fd;
    s->cancel_flags = IORING_ASYNC_CANCEL_FD | IORING_ASYNC_CANCEL_ALL;
    s->flags = IOSQE_IO_LINK;
    s->user_data = tag(kCancel, c.gen, fd);
    s = ring.sqe();
    s->opcode = IORING_OP_CLOSE;
    s->fd = fd;
    s->user_data = tag(kClose, c.gen, fd);
  };
  // Answers every complete request in the connection's bytes with one send
  // (one in flight per connection: its bytes live in `out` until it completes).
  auto respond = [&](int fd) {
    Conn& c = conns[static_cast<std::size_t>(fd)];
    c.out.clear();
    bool close = answer_requests(c.partial, c.out);
    if (c.partial.size() > 8192) close = true;
    if (close) c.closing = true;
    if (c.out.empty()) {
      if (close) close_conn(fd);
      return;
    }
    io_uring_sqe* s = ring.sqe();
    s->opcode = IORING_OP_SEND;
    s->fd = fd;
    s->addr = reinterpret_cast<std::uint64_t>(c.out.data());
    s->len = static_cast<std::uint32_t>(c.out.size());
    s->msg_flags = MSG_NOSIGNAL;
    s->user_data = tag(kSend, c.gen, fd);
    ++c.sends;
  };
  arm_accept();
  std::printf("listening on 127.0.0.1:%u (plain io_uring, 1 thread)\n", port);
  std::fflush(stdout);

  while (!stop_requested) {
    ring.enter(1);
    bool gave_back = false;
    ring.reap([&](const io_uring_cqe& e) {
      const auto kind = static_cast<Kind>(e.user_data >> 60);
      const int fd = static_cast<int>(static_cast<std::uint32_t>(e.user_data));
      const auto gen = static_cast<std::uint32_t>((e.user_data >> 32) & 0xfffffff);
      const bool more = (e.flags & IORING_CQE_F_MORE) != 0;
      switch (kind) {
        case kAccept: {
          if (!more) arm_accept();
          if (e.res < 0) return;
          if (static_cast<std::size_t>(e.res) >= conns.size()) conns.resize(static_cast<std::size_t>(e.res) * 2 + 1);
          Conn& c = conns[static_cast<std::size_t>(e.res)];
          c.gen = (c.gen + 1) & 0xfffffff;
          c.open = true;
          c.closing = false;
          c.sends = 0;
          arm_recv(e.res);
          return;
        }
        case kRecv: {
          Conn& c = conns[static_cast<std::size_t>(fd)];
          if ((e.flags & IORING_CQE_F_BUFFER) != 0) {
            const unsigned id = e.flags >> IORING_CQE_BUFFER_SHIFT;
            if (c.open && c.gen == gen && e.res > 0) c.partial.append(bufs.at(id), static_cast<std::size_t>(e.res));
            bufs.give_back(id);
            gave_back = true;
          }
          if (!c.open || c.gen != gen) return;  // a closed connection's last word
          if (e.res == -ENOBUFS) {  // the buffers ran out: the receive ended; arm it again
            if (!more) arm_recv(fd);
            return;
          }
          if (e.res <= 0) {  // the end of the stream, or an error
            if (c.sends == 0) close_conn(fd);
            c.closing = true;
            return;
          }
          if (!more) arm_recv(fd);
          if (c.sends == 0) respond(fd);  // else once the send in flight completes
          return;
        }
        case kSend: {
          Conn& c = conns[static_cast<std::size_t>(fd)];
          if (!c.open || c.gen != gen) return;
          --c.sends;
          // A hello response always fits the socket buffer; anything short is a reset.
          if (e.res < 0 || static_cast<std::size_t>(e.res) != c.out.size()) c.closing = true;
          if (c.closing) {
            close_conn(fd);
          } else if (!c.partial.empty()) {
            respond(fd);  // requests that came while it was in flight
          }
          return;
        }
        case kClose:
        case kCancel:
          return;
      }
    });
    if (gave_back) bufs.publish();
  }
  return 0;
}
