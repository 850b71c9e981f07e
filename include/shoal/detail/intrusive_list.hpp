// The one intrusive list: every waiter queue in shoal is built on it. A
// circular doubly-linked list through a sentinel: O(1) push, pop and unlink
// of any element, no allocation, and "is it queued" is one load.
#pragma once

#include "shoal/version.hpp"

namespace shoal::detail {

/// The links an element carries, one per list it can be in (`Tag` tells them
/// apart). Unlinked: `next` is null. Guarded by whatever guards the list.
template <class Tag = void>
struct ListHook {
  ListHook* prev = nullptr;
  ListHook* next = nullptr;
  bool is_linked() const noexcept { return next != nullptr; }
};

/// Where an element keeps its hook for lists tagged `Tag`. By default the
/// element derives from ListHook<Tag>; an element that must stay
/// standard-layout (the task record, inside every promise) keeps the hook as
/// a member and specializes this with offsetof.
template <class T, class Tag>
struct ListHookOf {
  static ListHook<Tag>* hook(T* x) noexcept { return x; }
  static T* element(ListHook<Tag>* h) noexcept { return static_cast<T*>(h); }
};

/// A list of `T`s linked through their ListHook<Tag>. Not thread-safe and
/// not movable (elements point at the sentinel): the owner's lock guards it.
template <class T, class Tag = void>
class IntrusiveList {
  using Hook = ListHook<Tag>;
  using Of = ListHookOf<T, Tag>;

 public:
  IntrusiveList() noexcept { head_.prev = head_.next = &head_; }
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;

  bool empty() const noexcept { return head_.next == &head_; }
  T* front() const noexcept { return empty() ? nullptr : down(head_.next); }
  T* back() const noexcept { return empty() ? nullptr : down(head_.prev); }
  /// The element after `x`, or null at the end.
  T* next(const T* x) const noexcept {
    Hook* n = up(x)->next;
    return n == &head_ ? nullptr : down(n);
  }

  void push_back(T* x) noexcept { link_before(&head_, up(x)); }
  /// Links `x` before `pos` (an element of this list), or at the back if
  /// `pos` is null.
  void insert_before(T* pos, T* x) noexcept { link_before(pos == nullptr ? &head_ : up(pos), up(x)); }
  /// The element before `x`, or null at the front.
  T* prev(const T* x) const noexcept {
    Hook* p = up(x)->prev;
    return p == &head_ ? nullptr : down(p);
  }
  void push_front(T* x) noexcept { link_before(head_.next, up(x)); }
  /// `x` must be in this list. Afterwards `next` is null (not linked);
  /// `prev` is left as it was, free for the owner's use.
  void remove(T* x) noexcept { unlink(x); }
  /// The same without naming the list: a circular list through a sentinel
  /// needs only the neighbours.
  static void unlink(T* x) noexcept {
    Hook* h = up(x);
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->next = nullptr;
  }
  T* pop_front() noexcept {
    T* x = front();
    if (x != nullptr) remove(x);
    return x;
  }
  static bool is_linked(const T* x) noexcept { return up(x)->is_linked(); }

 private:
  static Hook* up(const T* x) noexcept { return Of::hook(const_cast<T*>(x)); }
  static T* down(Hook* h) noexcept { return Of::element(h); }
  static void link_before(Hook* pos, Hook* h) noexcept {
    h->next = pos;
    h->prev = pos->prev;
    pos->prev->next = h;
    pos->prev = h;
  }
  mutable Hook head_;
};

}  // namespace shoal::detail
