// Files on the runtime: reads and writes at offsets, open, sync and close,
// without blocking a worker. On the io_uring backend (SHOAL_IO_BACKEND=uring)
// each operation is a submission to the ring, awaited in the task's frame;
// elsewhere it runs on the blocking pool (spawn_blocking). The contract is
// the same on both (docs/fs.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "shoal/runtime/task.hpp"

namespace shoal::fs {

/// How to open a file: open(2)'s flags by name. The default reads.
struct OpenOptions {
  bool read = true;        ///< open for reading
  bool write = false;      ///< open for writing
  bool create = false;     ///< create it if missing (O_CREAT)
  bool truncate = false;   ///< empty it (O_TRUNC; needs write)
  bool append = false;     ///< every write goes to the end, whatever its offset (O_APPEND)
  bool exclusive = false;  ///< with create: fail with EEXIST if it exists (O_EXCL)
  unsigned mode = 0644;    ///< a created file's permissions, before the umask
};

/// An open regular file (or block device), read and written at offsets: no
/// file position is shared, so tasks may read (or write disjoint ranges of)
/// one File at once. Pipes and sockets are streams (shoal/net/stream.hpp).
///
/// Every operation but close:
/// Checkpoint: yes (a cancelled task does nothing and throws Cancelled); it
///   always waits for the kernel or a pool thread, so it needs no budget yield.
/// Cancellation: an operation that has not started is withdrawn (Cancelled,
///   nothing done); one that has started finishes and its result is
///   returned, and the cancellation is seen at the next checkpoint. The
///   task never resumes while the kernel may still write its buffer.
/// Thread-safety: a File is moved and closed by one task at a time; its
///   reads and writes may run from several tasks at once.
/// Throws: Cancelled; std::system_error naming the operation, the path and
///   the offset (errno as the code); std::logic_error on a closed File or
///   outside a shoal task.
class File {
 public:
  /// Opens `path` (O_CLOEXEC always).
  static Task<File> open(std::string path, OpenOptions options);
  /// Opens `path` for reading.
  static Task<File> open(std::string path);
  /// Opens `path` for writing, created if missing, emptied if not.
  static Task<File> create(std::string path);

  /// Takes ownership of `fd`, an open file (opened elsewhere: memfd_create,
  /// another library); `path` names it in error messages.
  static File adopt(int fd, std::string path) noexcept { return File(fd, std::move(path)); }

  /// A File that holds no file (is_open() is false).
  File() noexcept = default;
  /// Takes over `o`'s file; `o` is left closed.
  File(File&& o) noexcept;
  /// Closes this file (as the destructor does), then takes over `o`'s.
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  /// Closes the file if it is still open, with close(2) on the calling
  /// thread (closing a local file does not wait for the disk: fsync does).
  ~File();

  /// Reads up to `buf.size()` bytes at `offset`; 0 at the end of the file
  /// (and for an empty `buf`). A read may be short.
  Task<std::size_t> read_at(std::span<std::byte> buf, std::uint64_t offset);
  /// Reads until `buf` is full or the file ends; returns how many bytes.
  /// Cancellation: the bytes read so far sit at the front of `buf`; how
  ///   many is not reported.
  Task<std::size_t> read_all(std::span<std::byte> buf, std::uint64_t offset);
  /// Writes up to `buf.size()` bytes at `offset` (at the end with `append`);
  /// returns how many were written.
  Task<std::size_t> write_at(std::span<const std::byte> buf, std::uint64_t offset);
  /// Writes all of `buf` at `offset`, with write_at calls.
  /// Cancellation: a prefix of `buf` is in the file; its length is in
  ///   `written` (the overload without it does not say).
  Task<void> write_all(std::span<const std::byte> buf, std::uint64_t offset);
  /// As write_all, counting in `written` the bytes that are in the file
  /// (all of them once it returns; a prefix if it is cancelled or throws).
  Task<void> write_all(std::span<const std::byte> buf, std::uint64_t offset, std::size_t& written);
  /// Flushes the file's data and metadata to the device (fsync(2)).
  Task<void> fsync();
  /// Flushes the file's data, and only the metadata needed to read it back
  /// (fdatasync(2)).
  Task<void> fdatasync();
  /// Closes the file. Checkpoint: no: it always closes, even in a cancelled
  /// task (the cancellation is seen at the next checkpoint). A close that
  /// reports an error (EIO from a deferred write) has closed the file too.
  /// Throws: std::system_error naming the path.
  Task<void> close();

  /// True while this holds a file (false once closed or moved from).
  bool is_open() const noexcept { return fd_ >= 0; }
  /// The file descriptor (-1 when closed): for calls shoal does not make
  /// (fstat, fallocate); closing it is the File's job.
  int native_handle() const noexcept { return fd_; }
  /// The path it was opened with.
  const std::string& path() const noexcept { return path_; }

 private:
  File(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

/// The whole of the file at `path`. Throws as File's operations.
Task<std::string> read_file(std::string path);
/// Writes `data` as the whole of the file at `path` (created if missing,
/// emptied if not), then closes it. Does not sync: call fsync for that.
/// Cancellation: the file holds a prefix of `data`.
Task<void> write_file(std::string path, std::span<const std::byte> data);

}  // namespace shoal::fs
