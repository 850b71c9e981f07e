// shoal::fs (shoal/fs/file.hpp). Each operation is one Submission: on a
// backend that runs operations (io_uring) it is a CompletionOp awaited in
// this frame; elsewhere the same call runs on the blocking pool. Close is
// never withdrawn: on the ring it is not cancellable, elsewhere it is
// close(2) on the calling thread (a pool job would be dropped by a
// cancelled task, leaking the descriptor).
#include "shoal/fs/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "shoal/runtime/spawn_blocking.hpp"
#include "src/runtime/driver/io/completion.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal::fs {
namespace {

using detail::io::OpCode;
using detail::io::Submission;

// The most read(2) and write(2) move at once on Linux; a larger request is
// a short one (and the ring's length field is 32 bits).
constexpr std::size_t kMaxTransfer = 0x7ffff000;

int blocking_call(const Submission& s) noexcept {
  long r = -1;
  do {
    switch (s.op) {
      case OpCode::read:
        r = ::pread(s.fd, const_cast<void*>(s.addr), s.len, static_cast<off_t>(s.offset));
        break;
      case OpCode::write:
        r = ::pwrite(s.fd, s.addr, s.len, static_cast<off_t>(s.offset));
        break;
      case OpCode::fsync:
        r = ::fsync(s.fd);
        break;
      case OpCode::fdatasync:
#if defined(__APPLE__)
        r = ::fsync(s.fd);  // macOS has no fdatasync(2)
#else
        r = ::fdatasync(s.fd);
#endif
        break;
      case OpCode::openat:
        r = ::open(static_cast<const char*>(s.addr), static_cast<int>(s.flags), static_cast<mode_t>(s.len));
        break;
      case OpCode::close:
        return ::close(s.fd) == 0 ? 0 : -errno;  // never retried: the descriptor is gone either way
      case OpCode::accept:
        return -EINVAL;  // not a file operation
    }
  } while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : static_cast<int>(r);
}

// One operation, on the ring or the blocking pool; the kernel's result
// (>= 0, or -errno).
Task<int> run(Submission s) {
  detail::TaskRecord* f = detail::current_record();
  if (f == nullptr) throw std::logic_error("shoal::fs: file operations must be awaited from a shoal task");
  if (f->sched->driver().runs_operations()) {
    detail::CompletionOp op(s, s.op != OpCode::close);
    co_return co_await op;
  }
  if (s.op == OpCode::close) co_return blocking_call(s);
  co_return co_await spawn_blocking([s] { return blocking_call(s); });
}

[[noreturn]] void fail(int err, const char* what, const std::string& path, std::uint64_t offset, bool at) {
  std::string msg = std::string("shoal::fs: ") + what + " " + path;
  if (at) msg += " at offset " + std::to_string(offset);
  throw std::system_error(err, std::generic_category(), msg);
}

void check_open(int fd, const char* what) {
  if (fd < 0) throw std::logic_error(std::string("shoal::fs::File::") + what + ": the file is not open");
}

int open_flags(const OpenOptions& o) {
  int flags = O_CLOEXEC;
  if (o.read && o.write) {
    flags |= O_RDWR;
  } else if (o.write || o.append) {
    flags |= O_WRONLY;
  } else if (o.read) {
    flags |= O_RDONLY;
  } else {
    throw std::invalid_argument("shoal::fs::File::open: OpenOptions asks for neither read nor write");
  }
  if (o.append) flags |= O_APPEND;
  if (o.create) flags |= O_CREAT;
  if (o.truncate) flags |= O_TRUNC;
  if (o.exclusive) flags |= O_EXCL;
  return flags;
}

// A read or write of up to `size` bytes at `offset`: how many moved. `path`
// and the buffer outlive the await (the File's member, the caller's span).
Task<std::size_t> transfer(int fd, const std::string& path, OpCode op, const void* addr, std::size_t size,
                           std::uint64_t offset) {
  const bool read = op == OpCode::read;
  check_open(fd, read ? "read_at" : "write_at");
  Submission s;
  s.op = op;
  s.fd = fd;
  s.addr = addr;
  s.len = static_cast<std::uint32_t>(std::min(size, kMaxTransfer));
  s.offset = offset;
  const int r = co_await run(s);
  if (r < 0) fail(-r, read ? "read of" : "write of", path, offset, true);
  co_return static_cast<std::size_t>(r);
}

// fsync or fdatasync of `fd` (`path` names it in errors; both outlive the
// await: the File's members).
Task<void> sync(int fd, const std::string& path, OpCode op) {
  const char* what = op == OpCode::fsync ? "fsync" : "fdatasync";
  check_open(fd, what);
  Submission s;
  s.op = op;
  s.fd = fd;
  const int r = co_await run(s);
  if (r < 0) fail(-r, op == OpCode::fsync ? "fsync of" : "fdatasync of", path, 0, false);
}

}  // namespace

Task<File> File::open(std::string path, OpenOptions options) {
  Submission s;
  s.op = OpCode::openat;
  s.addr = path.c_str();  // this frame outlives the operation
  s.flags = static_cast<std::uint32_t>(open_flags(options));
  s.len = options.mode;
  const int r = co_await run(s);
  if (r < 0) fail(-r, "open of", path, 0, false);
  co_return File(r, std::move(path));
}

Task<File> File::open(std::string path) { return open(std::move(path), OpenOptions{}); }

Task<File> File::create(std::string path) {
  OpenOptions o;
  o.read = false;
  o.write = true;
  o.create = true;
  o.truncate = true;
  return open(std::move(path), o);
}

File::File(File&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

Task<std::size_t> File::read_at(std::span<std::byte> buf, std::uint64_t offset) {
  return transfer(fd_, path_, OpCode::read, buf.data(), buf.size(), offset);
}

Task<std::size_t> File::read_all(std::span<std::byte> buf, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < buf.size()) {
    const std::size_t n = co_await read_at(buf.subspan(done), offset + done);
    if (n == 0) break;  // the end of the file
    done += n;
  }
  co_return done;
}

Task<std::size_t> File::write_at(std::span<const std::byte> buf, std::uint64_t offset) {
  return transfer(fd_, path_, OpCode::write, buf.data(), buf.size(), offset);
}

Task<void> File::write_all(std::span<const std::byte> buf, std::uint64_t offset, std::size_t& written) {
  written = 0;
  while (written < buf.size()) {
    const std::size_t n = co_await write_at(buf.subspan(written), offset + written);
    // write(2) of a regular file takes at least one byte or fails; a zero
    // would loop for ever.
    if (n == 0) fail(EIO, "write (no byte taken) of", path_, offset + written, true);
    written += n;
  }
}

Task<void> File::write_all(std::span<const std::byte> buf, std::uint64_t offset) {
  std::size_t written = 0;
  co_await write_all(buf, offset, written);
}

Task<void> File::fsync() { return sync(fd_, path_, OpCode::fsync); }

Task<void> File::fdatasync() { return sync(fd_, path_, OpCode::fdatasync); }

Task<void> File::close() {
  check_open(fd_, "close");
  Submission s;
  s.op = OpCode::close;
  s.fd = std::exchange(fd_, -1);  // closed whatever the result
  const int r = co_await run(s);
  if (r < 0) fail(-r, "close of", path_, 0, false);
}

Task<std::string> read_file(std::string path) {
  File f = co_await File::open(path);
  std::string out;
  struct stat st {};
  // The size is a hint (the file may grow or shrink meanwhile): read until
  // a read returns 0.
  std::size_t hint = 0;
  if (::fstat(f.native_handle(), &st) == 0 && st.st_size > 0) hint = static_cast<std::size_t>(st.st_size);
  out.resize(hint);
  std::size_t done = 0;
  for (;;) {
    // Past the size: a small read to see the end, doubling only if the file grew.
    if (done == out.size()) out.resize(done + (done > hint ? done - hint + 4096 : 4096));
    const std::size_t n = co_await f.read_at(std::as_writable_bytes(std::span(out)).subspan(done), done);
    if (n == 0) break;
    done += n;
  }
  out.resize(done);
  co_await f.close();
  co_return out;
}

Task<void> write_file(std::string path, std::span<const std::byte> data) {
  File f = co_await File::create(std::move(path));
  co_await f.write_all(data, 0);
  co_await f.close();
}

}  // namespace shoal::fs
