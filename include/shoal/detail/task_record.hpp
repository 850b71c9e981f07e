// The task record: the bookkeeping of one spawned task (and the chain of
// tasks it awaits, which run on its record). Only a spawned root has one:
// in its promise when the coroutine is a RootFrame (a spawn then costs one
// allocation), else allocated by the spawn. Awaited frames carry a pointer. It is not a fiber: there is no
// stack, only coroutine frames. Cancel nodes form the tree that
// cancellation walks; the wait hook is how a waiting task is found.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "shoal/detail/intrusive_list.hpp"
#include "shoal/detail/raise.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/runtime_abi.hpp"

namespace shoal::detail {

class Scheduler;
struct TaskRecord;
struct CancelNode;
struct PromiseBase;
struct JoinCell;
class WordWaiter;
struct InNodeTag;   // a task record in its scope's node
struct ChildTag;    // a cancel node among its parent's children

/// A wait that cancellation can interrupt. `cancel_wait` runs on the
/// cancelling thread; it returns true if it took the waiter out of whatever
/// it waited on, in which case the caller schedules the task (which then
/// throws Cancelled). It must not schedule the task itself.
struct WaitHook {
  virtual bool cancel_wait() noexcept = 0;
  /// What the task waits on, for Runtime::dump_tasks ("channel receive").
  virtual const char* wait_kind() const noexcept { return "a runtime wait"; }

 protected:
  ~WaitHook() = default;
};

/// Whoever joins a spawned task (a scope, the runtime's root).
struct TaskOwner {
  /// Called from the finished task's final suspend. Returns the coroutine to
  /// run next on this thread (usually noop).
  virtual std::coroutine_handle<> task_done(TaskRecord& f, PromiseBase& p,
                                             std::coroutine_handle<> frame) noexcept = 0;

 protected:
  ~TaskOwner() = default;
};

inline constexpr std::uint8_t kBudget = 128;

/// A named task's label (TaskRecord::label_): owned by its record
/// (src/runtime/runtime.cpp).
struct TaskName;

/// A label the task's own frame keeps and writes only when a dump asks
/// (TaskRecord::label_): serve's "connection from <peer>" costs no
/// allocation per connection. Not owned by the record; whoever sets it
/// clears it (describe_task) before the frame that holds it goes.
struct TaskDescriber {
  const char* origin = nullptr;  // the label it replaced: where the task was spawned
  std::uint32_t line = 0;
  void (*describe)(const TaskDescriber& self, std::string& out) = nullptr;
};

/// Where a task may run: the placement component's state
/// (src/runtime/placement.hpp), written by the task itself or by whoever
/// holds it suspended and unqueued.
struct Placement {
  std::uint16_t pin = 0;   // 1 + the only worker it runs on (spawn_local, a contention move); 0: any
  std::uint16_t soft = 0;  // a contention move's pin: its kind and count (placement.hpp)
};

struct TaskRecord {
  TaskRecord* next = nullptr;                 // run-queue / batch link
  // A hint beside the link: the record kAhead places further on in an
  // overflow batch, so a walk of the batch fetches that far ahead instead
  // of missing on one link after another. Stale outside such a batch; only
  // ever prefetched, never dereferenced.
  TaskRecord* ahead = nullptr;
  std::coroutine_handle<> resume;        // innermost suspended frame
  Scheduler* sched = nullptr;
  shim::atomic<CancelNode*> node{nullptr};  // innermost cancel node; written by the task only
  CancelNode* home = nullptr;            // the node of the scope it was spawned into
  ListHook<InNodeTag> in_node;            // in home's list (home's lock), once it first waits
  shim::atomic<WaitHook*> hook{nullptr};  // armed while suspended at a cancellable wait
  JoinCell* cell = nullptr;               // Scope::start: where the result goes (kStarted)
  PromiseBase* root = nullptr;            // the promise of the frame spawned as this task
  std::uint8_t budget = kBudget;
  // JoinHandle::cancel(): this one child is cancelled. Seen at its checkpoints
  // only while it runs in `home` (nested nodes inherit it when entered).
  shim::atomic<bool> cancel_alone{false};
  // The worker that last ran it (kNoWorker: none yet, or past 254), written
  // by that worker as it resumes the task: where a contended lock's holder runs.
  std::uint8_t worker = kNoWorker;
  std::uint8_t flags = 0;  // kStarted, kLinked, kCellValue
  Placement place;
  // For Runtime::dump_tasks: where it was spawned, a file and line, or
  // (line 0) the text of callable_origin<F>() for a spawned callable; null
  // when unknown. A named task (rare) keeps both in a TaskName instead,
  // with its name, so that every other record is 16 bytes smaller.
  // `wait_since`: when its current wait began (milliseconds, wrapping),
  // kept only by a runtime that tracks waits.
  const void* label_ = nullptr;       // the origin's text, or a TaskName if named
  std::uint32_t origin_line_ = 0;     // its line, or kNamed
  std::uint32_t wait_since = 0;

  TaskRecord() noexcept = default;
  TaskRecord(const TaskRecord&) = delete;
  TaskRecord& operator=(const TaskRecord&) = delete;
  ~TaskRecord() {
    if (origin_line_ == kNamed) [[unlikely]] drop_name();
  }

  static constexpr std::uint32_t kNamed = 0xffffffff;
  static constexpr std::uint32_t kDescribed = 0xfffffffe;
  const TaskName* named() const noexcept {
    return origin_line_ == kNamed ? static_cast<const TaskName*>(label_) : nullptr;
  }
  const TaskDescriber* described() const noexcept {
    return origin_line_ == kDescribed ? static_cast<const TaskDescriber*>(label_) : nullptr;
  }
  const char* origin() const noexcept;
  std::uint32_t origin_line() const noexcept;
  /// Null when unnamed.
  const char* name() const noexcept;
  /// Sets where it was spawned (keeping its name).
  void set_origin(const char* where, std::uint32_t line) noexcept {
    if (origin_line_ >= kDescribed) [[unlikely]] {
      set_label_origin(where, line);
    } else {
      label_ = where;
      origin_line_ = line;
    }
  }

  static constexpr std::uint8_t kNoWorker = 0xff;

  static constexpr std::uint8_t kStarted = 1;    // Scope::start: the result goes to `cell`
  static constexpr std::uint8_t kLinked = 2;     // in home's task list (linked at its first wait)
  static constexpr std::uint8_t kCellValue = 4;  // `cell` is a JoinCellValue (a non-void result)

  /// seq_cst where a wait's re-check pairs with a canceller (Dekker).
  bool cancelled(std::memory_order mo = std::memory_order_acquire) const noexcept;

 private:
  void drop_name() noexcept;
  void set_label_origin(const char* where, std::uint32_t line) noexcept;
};

// The task record stays standard-layout: its hook is a member, found by offset.
template <>
struct ListHookOf<TaskRecord, InNodeTag> {
  static ListHook<InNodeTag>* hook(TaskRecord* f) noexcept { return &f->in_node; }
  static TaskRecord* element(ListHook<InNodeTag>* h) noexcept {
    return reinterpret_cast<TaskRecord*>(reinterpret_cast<char*>(h) - offsetof(TaskRecord, in_node));
  }
};
using RecordList = IntrusiveList<TaskRecord, InNodeTag>;

/// What a Scope::start child leaves for its JoinHandle. The child's frame
/// and record go when it finishes (its arguments and locals die then, as a
/// spawned child's do); its result moves here, so a finished child costs
/// only its cell (32 bytes for a void one) until the handle takes or drops
/// it. The handle owns the cell; one dropped while the child runs leaves it
/// to the child (kAbandoned).
struct JoinCell {
  // The join word (a WordWaiter's, marked with the waiter's address): 0
  // while the child runs, kDone once it finished, kAbandoned once the handle
  // went first, the waiting task's WordWaiter while one waits; bit 0 is the
  // WordWaiter's kCancelPending.
  static constexpr std::uint64_t kDone = 2, kAbandoned = 4;
  shim::atomic<std::uint64_t> join{0};
  // The child's record while it runs, | 1 once a JoinHandle::cancel() has
  // marked it: the finishing child then passes through the node's lock
  // before its record goes, so the canceller (under that lock) never uses
  // a freed record. 0 (or 1) once the child is done.
  shim::atomic<std::uintptr_t> record{0};
  std::exception_ptr error;  // the child's fault (or Cancelled), once done
  // Listed on the scope's undelivered later faults (node lock): the next
  // cell, or itself for the last; null when not listed.
  JoinCell* next = nullptr;
};

/// A cell that holds a value: dropped through `drop` where its type is not
/// known (a child finishing after its handle went).
struct JoinCellValue : JoinCell {
  void (*drop)(JoinCell* c) noexcept = nullptr;
};

struct CancelNode : ListHook<ChildTag> {
  shim::atomic<bool> cancelled{false};
  shim::atomic<bool> self_cancelled{false};  // cancellation was requested here, not inherited
  bool shielded = false;
  CancelNode* parent = nullptr;
  TaskRecord* body = nullptr;  // the task running this node's body
  Scheduler* sched = nullptr;
  TaskOwner* owner = nullptr;  // what tasks spawned into this node report to when done (a child group's)
  SpinLock lock;
  // Guarded by `lock`: child nodes, and the tasks waiting inside this one.
  IntrusiveList<CancelNode, ChildTag> children;
  RecordList records;

  /// Links this node under `parent` (inheriting its cancellation unless
  /// shielded). `parent` may be null for a root.
  void attach(CancelNode* parent_node, TaskRecord* body_record, Scheduler* s) noexcept;
  void detach() noexcept;
  /// The task `body` enters this node for a while (a scope, a task set, a
  /// deadline): attached under the node it is in, and its node until leave().
  void enter(TaskRecord* body) noexcept;
  void leave(TaskRecord* body) noexcept;
  void add_record(TaskRecord* f) noexcept;
  void remove_record(TaskRecord* f) noexcept;
  /// Cancels this node and every non-shielded descendant, waking the tasks
  /// suspended at cancellable waits inside them. Any thread.
  void cancel(bool self) noexcept;
  /// Cancels one started task of this node (JoinHandle::cancel: `record` is
  /// its cell's record word) and the nodes it entered here, not its
  /// siblings; does nothing once it finished. Any thread.
  void cancel_one(shim::atomic<std::uintptr_t>& record) noexcept;
};

inline bool TaskRecord::cancelled(std::memory_order mo) const noexcept {
  const CancelNode* n = node.load(std::memory_order_relaxed);
  return n->cancelled.load(mo) || (n == home && cancel_alone.load(mo));
}



/// The cancellable-wait protocol, for any primitive a task can wait on:
///  1. `publish_hook(f, w)` before the wait is registered anywhere;
///  2. register the wait, then re-check `f->cancelled()` *after* any point
///     where a `cancel_wait()` that ran too early would have been missed
///     (lock-based primitives: register and re-check under their lock;
///     cancel_wait takes the same lock);
///  3. the hook is armed only while the task is suspended: every path of
///     await_suspend that does not suspend disarms before returning, and a
///     waker disarms (`disarm_wait(f, w)`) before it schedules the task; a
///     canceller that claims the wait clears it itself. Never disarm while
///     holding a lock that cancel_wait takes.
/// Why not disarm in await_resume: g++ may run the await_suspend of a second
/// `co_await` in the same expression before the first one's await_resume.
/// The seq_cst hook store pairs with the canceller's seq_cst flag store.
void publish_hook(TaskRecord* f, WaitHook* w) noexcept;
/// Publishes the hook, then returns false (hook cleared) if the task is
/// already cancelled.
bool arm_wait(TaskRecord* f, WaitHook* w) noexcept;
/// Clears the hook after the wait ended (either way); waits out a canceller
/// that is inspecting it.
void disarm_wait(TaskRecord* f, WaitHook* w) noexcept;

/// One task's wait on a word that its owner's state shares (a Scope::start
/// child's join word, a TaskSet's state): lock-free, one waiter at a time.
/// Tokio's AtomicWaker shape, with the owner's state in the same word so
/// that "check, then wait" is one CAS. The waiter puts its mark in the word
/// with that CAS: a bit of the owner's choosing, or (bit 0) its own
/// address, above the word's three low bits, so that the waker finds it in
/// the value it swapped out. Whoever clears the mark owns the wake
/// (disarm_wait, then schedule `waiter`). A canceller that finds no mark
/// leaves kCancelPending (bit 0 of every such word): a waiter that armed its
/// hook but has not registered then fails its CAS and cancels itself.
class WordWaiter : public WaitHook {
 public:
  static constexpr std::uint64_t kCancelPending = 1;
  static constexpr std::uint64_t kLowBits = 7;  // an address mark leaves these to the owner
  enum class Registered : std::uint8_t { waiting, cancelled, not_needed };

  /// Registers `f` (its `resume` set) as `word`'s waiter: arms this hook,
  /// then asks `check(v)` of the word's value: 0 to wait (the mark is set),
  /// 1 not to (the condition holds; `check` may have CASed the word
  /// itself), -1 to look again (its CAS failed and updated `v`). On
  /// `waiting` nothing may touch *this any more; on the others the hook is
  /// disarmed again. Defined in src/scope/word_wait.hpp.
  template <class Check>
  Registered register_wait(shim::atomic<std::uint64_t>& word, TaskRecord* f, Check&& check) noexcept;
  /// register_wait until any of `done` is set in the word (out of line: a
  /// join's awaiter stays small enough to inline).
  Registered register_until(shim::atomic<std::uint64_t>& word, TaskRecord* f, std::uint64_t done) noexcept;
  /// Clears a canceller's mark (the waiter, once it runs again).
  void clear_pending() noexcept { word_->fetch_and(~kCancelPending, std::memory_order_acq_rel); }
  bool cancel_wait() noexcept final;
  /// The word's owner took this waiter's address mark (exchanging the
  /// word): the wake is its. A task's wait is disarmed and scheduled; a
  /// select's case (on_join) claims its select instead.
  virtual void wake_taken() noexcept;
  /// The waiter whose address mark is in `v`, or null (an address-marked word).
  static WordWaiter* in(std::uint64_t v) noexcept { return reinterpret_cast<WordWaiter*>(v & ~kLowBits); }

  TaskRecord* waiter = nullptr;

 protected:
  /// `bit`: the waiter's mark; 0: its address.
  explicit WordWaiter(std::uint64_t bit) noexcept : bit_(bit) {}
  ~WordWaiter() = default;

 private:
  std::uint64_t mark() const noexcept { return bit_ != 0 ? bit_ : reinterpret_cast<std::uintptr_t>(this); }
  bool marked(std::uint64_t v) const noexcept { return bit_ != 0 ? (v & bit_) != 0 : in(v) == this; }
  std::uint64_t unmarked(std::uint64_t v) const noexcept { return bit_ != 0 ? v & ~bit_ : v & kLowBits; }

  shim::atomic<std::uint64_t>* word_ = nullptr;  // set by register_wait
  std::uint64_t bit_;
};
static_assert(alignof(WordWaiter) > WordWaiter::kLowBits);

/// Finds the task of the coroutine awaiting a runtime operation.
template <class P>
TaskRecord* record_of(std::coroutine_handle<P> h) noexcept {
  if constexpr (requires { h.promise().record_; }) {
    return h.promise().record_;
  } else {
    return current_record();
  }
}

/// A spawned callable's origin for a task dump: the compiler's text for this
/// function, which names F ("... [with F = main()::<lambda()>]" from g++,
/// "... [F = (lambda at main.cpp:12:11)]" from clang). No RTTI needed.
template <class F>
const char* callable_origin() noexcept {
  return __PRETTY_FUNCTION__;
}

/// Names the task `f` (a copy of `name`; an empty one clears it). Throws
/// std::bad_alloc.
void set_task_name(TaskRecord& f, const char* name, std::size_t size);
/// Labels the calling task with `d` (kept by the caller, which must call
/// this again with null before `d` goes; null restores the spawn site).
/// Replaces a name. No effect outside a task.
void describe_task(TaskDescriber* d) noexcept;

/// Spends one unit of the cooperative budget; true when it ran out and the
/// caller should yield.
inline bool consume_budget(TaskRecord* f) noexcept {
  if (f->budget == 0 || --f->budget == 0) {
    f->budget = kBudget;
    return true;
  }
  return false;
}

}  // namespace shoal::detail
