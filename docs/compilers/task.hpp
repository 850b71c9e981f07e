// A minimal lazy coroutine task for the reproducers (no shoal).
#pragma once
#include <coroutine>
#include <exception>
#include <cstdio>
#include <string>
#include <initializer_list>
struct Task {
  struct promise_type {
    std::coroutine_handle<> cont;
    Task get_return_object() { return Task{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final { bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept { auto c = h.promise().cont; return c ? c : std::noop_coroutine(); }
      void await_resume() noexcept {} };
    Final final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
  std::coroutine_handle<promise_type> h;
  explicit Task(std::coroutine_handle<promise_type> x) : h(x) {}
  Task(Task&& o) noexcept : h(o.h) { o.h = {}; }
  ~Task() { if (h) h.destroy(); }
  bool await_ready() { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> c) { h.promise().cont = c; return h; }
  void await_resume() {}
};
