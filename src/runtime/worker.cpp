// A step of a task on a worker (see worker.hpp).
#include "src/runtime/worker.hpp"

#include <cstdio>
#include <sstream>
#include <string>

#include "src/runtime/wait_inspect.hpp"


namespace shoal::detail {

thread_local constinit Worker* tls_worker = nullptr;
thread_local constinit TaskRecord* tls_record = nullptr;

void ForeignWake::wait_out(const shim::atomic<std::uint32_t>& n) noexcept {
  SpinWait wait;  // a foreign wake is a few instructions from done
  while (n.load(std::memory_order_acquire) != 0) wait.pause();
}

// The step is timed on the coarse clock (a few ns a read, ticks of 1-4 ms)
// and reported when it ends, by the worker itself, from a label copied as it
// started: once the step is over the task may be gone (finished, or woken
// and finished on another worker), and nothing else reads the copy. A step
// that never ends is what the task dump (dump_signal) is for.
void step_timed(Worker& w, TaskRecord* f, std::uint32_t long_poll_ms) noexcept {
  try {
    w.step_label = TaskLabel::of(*f);
  } catch (...) {  // out of memory for the name: report without it
    w.step_label.name.clear();
  }
  const std::uint32_t start = wait_clock_ms();
  step(w, f);
  const std::uint32_t ran = wait_clock_ms() - start;
  if (ran < long_poll_ms) return;
  try {
    std::ostringstream line;
    line << "shoal: a task step ran ";
    write_duration(line, ran);
    line << " without yielding on worker " << w.index << ": ";
    write_label(line, w.step_label);
    line << "; other tasks on that worker waited meanwhile (RuntimeOptions::long_poll_warning)\n";
    const std::string text = line.str();
    std::fwrite(text.data(), 1, text.size(), stderr);
  } catch (...) {
  }
}

}  // namespace shoal::detail
