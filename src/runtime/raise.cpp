// Raising shoal::Cancelled (include/shoal/detail/raise.hpp): the one
// out-of-line throw, and the pieces of the direct raise that need the C++
// runtime's ABI. Its own file so that the model checker links it too.
#include <cxxabi.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <typeinfo>
#include <utility>

#include "shoal/runtime/errors.hpp"

#if SHOAL_DIRECT_RAISE
// ASan's hook for a stack left without returning, which its __cxa_throw
// interceptor calls. Weak, and looked for at run time: whether the program
// runs under ASan is the program's choice (its own build may have ASan when
// this library's has none), not this library's.
extern "C" void __asan_handle_no_return() __attribute__((weak));
#endif

namespace shoal::detail {

void throw_cancelled() { throw Cancelled{}; }

#if SHOAL_DIRECT_RAISE
namespace {
// The Itanium C++ ABI's per-thread exception globals (section 2.2.2):
// __cxa_throw counts a raise here, and __cxa_begin_catch uncounts it.
struct EhGlobals {
  void* caught_exceptions;
  unsigned int uncaught_exceptions;
};
}  // namespace

_Unwind_Exception* new_cancelled_exception() noexcept {
  // make_exception_ptr allocates and initializes the object exactly as
  // __cxa_throw does before it raises, and holds one reference: the one a
  // raise holds until its handler ends.
  std::exception_ptr ref = std::make_exception_ptr(Cancelled{});
  static_assert(sizeof ref == sizeof(void*), "libstdc++'s exception_ptr is the address of the thrown object");
  void* object = nullptr;
  std::memcpy(&object, &ref, sizeof object);
  // Hand that reference to the raise: moved into storage never destroyed.
  alignas(std::exception_ptr) unsigned char keep[sizeof ref];
  ::new (static_cast<void*>(keep)) std::exception_ptr(std::move(ref));
  ++reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals())->uncaught_exceptions;
  // The ABI puts the unwind header last in __cxa_exception, right before
  // the thrown object, and the handler's object pointer (adjustedPtr) right
  // before the header. The search phase would set that pointer; Cancelled
  // has no base class, so every handler that matches it gets the object.
  auto* header = static_cast<_Unwind_Exception*>(object) - 1;
  reinterpret_cast<void**>(header)[-1] = object;
  // No frame designated as the handler's: the cleanup phase stops at the
  // first handler that matches.
  header->private_1 = 0;
  header->private_2 = 0;
  if (&__asan_handle_no_return != nullptr) __asan_handle_no_return();  // what ASan's __cxa_throw does
  return header;
}

void raise_failed(_Unwind_Exception* e) noexcept {
  abi::__cxa_begin_catch(e);
  std::terminate();
}
#endif

#if SHOAL_RAISE_IN_FRAME
// ---- the raise in the raising frame -----------------------------------
//
// _Unwind_Resume costs ~4,000 instructions for a raise whose handler is in
// the raising frame: it computes its own frame's state, then the caller's,
// runs the personality routine over the caller's exception table, and
// installs the landing pad. Everything but the install depends only on the
// call site and the exception's type, which is always Cancelled: so the
// landing pad and its selector are looked up once per site, as
// __gxx_personality_v0 would in the cleanup phase, and kept. A raise then
// costs a table probe and a jump.
/// What the personality routine would do for a Cancelled raised at a site
/// (returned in rax:rdx to the stub).
struct Landing {
  std::uintptr_t pad;      // 0: not in this frame (or no table): _Unwind_Resume
  std::intptr_t selector;  // the catch clause's filter, 0 for a cleanup
};

namespace {

// DWARF exception-header pointer encodings (the LSB's "DWARF Extensions").
constexpr unsigned char kOmit = 0xff;
constexpr unsigned char kIndirect = 0x80;

/// A LEB128 number's bits; `bits` is how many it had (for a sign).
std::uintptr_t read_leb(const unsigned char*& p, unsigned& bits, bool& negative) noexcept {
  std::uintptr_t v = 0;
  bits = 0;
  unsigned char b = 0;
  do {
    b = *p++;
    v |= static_cast<std::uintptr_t>(b & 0x7f) << bits;
    bits += 7;
  } while ((b & 0x80) != 0);
  negative = (b & 0x40) != 0;
  return v;
}

std::uintptr_t read_uleb(const unsigned char*& p) noexcept {
  unsigned bits = 0;
  bool negative = false;
  return read_leb(p, bits, negative);
}

std::intptr_t read_sleb(const unsigned char*& p) noexcept {
  unsigned bits = 0;
  bool negative = false;
  std::uintptr_t v = read_leb(p, bits, negative);
  if (negative && bits < 8 * sizeof v) v |= ~std::uintptr_t{0} << bits;
  return static_cast<std::intptr_t>(v);
}

template <class T>
T load(const unsigned char* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// The size of a fixed-size encoding; 0 for the variable ones.
std::size_t encoded_size(unsigned char enc) noexcept {
  switch (enc & 0x0f) {
    case 0x00: return sizeof(void*);
    case 0x02: case 0x0a: return 2;
    case 0x03: case 0x0b: return 4;
    case 0x04: case 0x0c: return 8;
    default: return 0;
  }
}

/// Reads a value in `enc`, relative to `func` for function-relative ones.
/// False for an encoding the C++ personality routine never meets in a
/// table it reads (aligned, text- or data-relative): the caller gives up.
bool read_encoded(unsigned char enc, const unsigned char*& p, std::uintptr_t func, std::uintptr_t& out) noexcept {
  const unsigned char* field = p;
  std::uintptr_t v = 0;
  switch (enc & 0x0f) {
    case 0x00: v = load<std::uintptr_t>(p); p += sizeof(std::uintptr_t); break;
    case 0x01: v = read_uleb(p); break;
    case 0x02: v = load<std::uint16_t>(p); p += 2; break;
    case 0x03: v = load<std::uint32_t>(p); p += 4; break;
    case 0x04: v = load<std::uint64_t>(p); p += 8; break;
    case 0x09: v = static_cast<std::uintptr_t>(read_sleb(p)); break;
    case 0x0a: v = static_cast<std::uintptr_t>(static_cast<std::intptr_t>(load<std::int16_t>(p))); p += 2; break;
    case 0x0b: v = static_cast<std::uintptr_t>(static_cast<std::intptr_t>(load<std::int32_t>(p))); p += 4; break;
    case 0x0c: v = static_cast<std::uintptr_t>(load<std::int64_t>(p)); p += 8; break;
    default: return false;
  }
  if (v != 0) {  // as the unwinder: a zero stays zero, whatever it is relative to
    switch (enc & 0x70) {
      case 0x00: break;
      case 0x10: v += reinterpret_cast<std::uintptr_t>(field); break;
      case 0x40: v += func; break;
      default: return false;
    }
    if ((enc & kIndirect) != 0) v = load<std::uintptr_t>(reinterpret_cast<const unsigned char*>(v));
  }
  out = v;
  return true;
}

/// The personality routine's cleanup-phase answer for Cancelled at `ip`
/// (a return address minus one) in a frame whose exception table is
/// `lsda` and whose code starts at `func`.
Landing landing_in(const unsigned char* lsda, std::uintptr_t func, std::uintptr_t ip) noexcept {
  constexpr Landing kNone{0, 0};
  if (lsda == nullptr) return kNone;
  const unsigned char* p = lsda;
  std::uintptr_t lp_start = func;
  const unsigned char lp_enc = *p++;
  if (lp_enc != kOmit && !read_encoded(lp_enc, p, func, lp_start)) return kNone;
  const unsigned char ttype_enc = *p++;
  const unsigned char* ttype = nullptr;
  if (ttype_enc != kOmit) {
    const std::uintptr_t off = read_uleb(p);
    ttype = p + off;
  }
  const unsigned char cs_enc = *p++;
  const std::uintptr_t cs_len = read_uleb(p);
  const unsigned char* actions = p + cs_len;
  std::uintptr_t pad = 0;
  std::uintptr_t action = 0;
  for (;;) {
    if (p >= actions) return kNone;  // no entry: the unwinder calls std::terminate, so let it
    std::uintptr_t start = 0, len = 0, lp = 0;
    if (!read_encoded(cs_enc, p, 0, start) || !read_encoded(cs_enc, p, 0, len) || !read_encoded(cs_enc, p, 0, lp)) {
      return kNone;
    }
    action = read_uleb(p);
    if (ip < lp_start + start) return kNone;  // sorted: passed it
    if (ip < lp_start + start + len) {
      pad = lp != 0 ? lp_start + lp : 0;
      break;
    }
  }
  if (pad == 0) return kNone;     // nothing to run here: the frame is unwound past
  if (action == 0) return {pad, 0};  // cleanups only
  bool cleanup = false;
  const unsigned char* a = actions + action - 1;
  for (;;) {
    const std::intptr_t filter = read_sleb(a);
    const unsigned char* disp_at = a;
    const std::intptr_t disp = read_sleb(a);
    if (filter == 0) {
      cleanup = true;
    } else if (filter > 0) {
      const std::size_t size = encoded_size(ttype_enc);
      if (ttype == nullptr || size == 0) return kNone;
      const unsigned char* entry = ttype - static_cast<std::size_t>(filter) * size;
      std::uintptr_t type = 0;
      if (!read_encoded(ttype_enc, entry, func, type)) return kNone;
      // Cancelled is final, with no base: only catch (...) and a catch of
      // Cancelled itself match it (the table holds the type without cv or &).
      if (type == 0 || *reinterpret_cast<const std::type_info*>(type) == typeid(Cancelled)) {
        return {pad, filter};
      }
    } else {
      return kNone;  // an exception specification: let the personality routine check it
    }
    if (disp == 0) break;
    a = disp_at + disp;
  }
  return cleanup ? Landing{pad, 0} : kNone;
}

struct Probe {
  std::uintptr_t ra;
  const unsigned char* lsda = nullptr;
  std::uintptr_t func = 0;
  int frames = 0;
  bool found = false;
};

_Unwind_Reason_Code find_frame(_Unwind_Context* ctx, void* arg) {
  auto* probe = static_cast<Probe*>(arg);
  if (_Unwind_GetIP(ctx) == probe->ra) {
    probe->lsda = static_cast<const unsigned char*>(_Unwind_GetLanguageSpecificData(ctx));
    probe->func = _Unwind_GetRegionStart(ctx);
    probe->found = true;
    return _URC_END_OF_STACK;
  }
  // This function, shoal_raise_in_frame, then the raising frame.
  return ++probe->frames < 8 ? _URC_NO_REASON : _URC_END_OF_STACK;
}

/// Looks the site up the slow way: the unwinder finds the frame's table.
[[gnu::noinline]] Landing look_up(std::uintptr_t ra) noexcept {
  Probe probe{ra};
  _Unwind_Backtrace(&find_frame, &probe);
  if (!probe.found) return {0, 0};
  return landing_in(probe.lsda, probe.func, ra - 1);
}

// The sites seen so far: open addressing, written once (claimed, filled,
// then published by the key), never removed. Code does not move while it
// is mapped, but a library can be unloaded and another mapped where it
// was: an entry also holds the eight bytes of code before its return
// address (the call itself and what precedes it), and a site whose code
// differs is looked up afresh and not kept.
struct Site {
  std::atomic<std::uintptr_t> key{0};
  std::uint64_t code = 0;
  Landing landing{};
};
constexpr std::size_t kSites = 2048;  // 64 KiB of zero pages until used
constexpr std::uintptr_t kClaimed = 1;
constexpr int kMaxProbes = 16;
Site g_sites[kSites];
std::atomic<std::size_t> g_sites_landed{0};

std::size_t slot_of(std::uintptr_t ra) noexcept {
  return static_cast<std::size_t>((ra * 0x9E3779B97F4A7C15ull) >> 53) & (kSites - 1);
}

}  // namespace

std::size_t raise_sites_landed() noexcept { return g_sites_landed.load(std::memory_order_relaxed); }

}  // namespace shoal::detail

/// Called by the stub below with the raising frame's return address.
/// Returns the landing pad (rax) and selector (rdx), or a zero pad.
extern "C" [[gnu::used, gnu::visibility("hidden")]] shoal::detail::Landing shoal_landing_for(
    std::uintptr_t ra) noexcept {
  using namespace shoal::detail;
  const std::uint64_t code = load<std::uint64_t>(reinterpret_cast<const unsigned char*>(ra) - 8);
  std::size_t i = slot_of(ra);
  for (int n = 0; n < kMaxProbes; ++n, i = (i + 1) & (kSites - 1)) {
    Site& s = g_sites[i];
    std::uintptr_t k = s.key.load(std::memory_order_acquire);
    if (k == ra) return s.code == code ? s.landing : look_up(ra);
    if (k == 0 && s.key.compare_exchange_strong(k, kClaimed, std::memory_order_acquire)) {
      s.code = code;
      s.landing = look_up(ra);
      s.key.store(ra, std::memory_order_release);
      if (s.landing.pad != 0) g_sites_landed.fetch_add(1, std::memory_order_relaxed);
      return s.landing;
    }
  }
  return look_up(ra);  // full near here, or being filled: look up without keeping it
}

// shoal_raise_in_frame(e): rsp+0 holds the raising frame's return address.
// Exported (cmake/shoal.map): inline code in users' objects calls it, and
// a PLT entry jumps, so the return address is still the raising frame's.
// With a landing pad, resume there as the unwinder would: the stack as
// after the call returned, the callee-saved registers untouched (the
// lookup preserves them), the exception in rax and the selector in rdx.
// Without one, tail-call _Unwind_Resume: it sees the same caller and
// return address as if the frame had called it.
asm(R"(
  .text
  .p2align 4
  .globl shoal_raise_in_frame
  .type shoal_raise_in_frame,@function
shoal_raise_in_frame:
  .cfi_startproc
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  movq 8(%rsp), %rdi
  call shoal_landing_for
  popq %rdi
  .cfi_adjust_cfa_offset -8
  testq %rax, %rax
  jz 1f
  movq %rax, %rcx
  movq %rdi, %rax
  addq $8, %rsp
  jmpq *%rcx
1:
  jmp _Unwind_Resume@PLT
  .cfi_endproc
  .size shoal_raise_in_frame, .-shoal_raise_in_frame
)");

namespace shoal::detail {
#endif

}  // namespace shoal::detail
