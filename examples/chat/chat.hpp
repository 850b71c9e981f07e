// The chat room behind examples/chat_server.cpp: each connection sends its
// nickname, then lines; every line goes to everyone. One hub task owns the
// room: it selects over the lines coming in, the shutdown event and a
// once-a-minute tick, and broadcasts. Each connection is one task in one
// loop: a line from the client, a line for the room's output or the
// client's idle limit, whichever comes first; a client too slow to keep up
// is told how many lines it missed instead of holding memory.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "shoal/shoal.hpp"

namespace chat {

struct Limits {
  std::size_t max_line = 4096;            ///< longer lines end the connection
  std::size_t backlog = 256;              ///< lines a client may fall behind before it lags
  std::chrono::milliseconds idle{300'000};  ///< a client silent this long is dropped
};

/// What a connection sends the hub.
struct Line {
  std::string from;  // "" for the room's own notices
  std::string text;
};

class Room {
 public:
  explicit Room(Limits limits = {}) : limits_(limits), incoming_(64), out_(limits.backlog) {}

  /// The hub: runs until `shutdown` is set, then tells everyone and closes
  /// the room (every connection's writer then ends, and with it the
  /// connection). Checkpoint: yes. Throws: Cancelled.
  shoal::Task<void> run(shoal::Event& shutdown) {
    shoal::Interval minute(std::chrono::minutes(1), shoal::MissedTick::skip);
    (void)co_await minute.tick();  // the first tick is due at once
    for (;;) {
      auto r = co_await shoal::select(shoal::on_recv(incoming_), shoal::on_event(shutdown),
                                      shoal::on_deadline(minute.next_tick()));
      if (r.index() == 0) {
        Line line = *std::get<0>(std::move(r));  // incoming_ is closed only below
        (void)out_.send(line.from.empty() ? "* " + line.text + "\n" : line.from + ": " + line.text + "\n");
      } else if (r.index() == 1) {
        (void)out_.send("* the server is shutting down\n");
        out_.close();
        incoming_.close();  // readers' sends fail from here on
        co_return;
      } else {
        (void)co_await minute.tick();
        (void)out_.send("* " + std::to_string(out_.receiver_count()) + " online\n");
      }
    }
  }

  /// One connection: the first line is the nickname. Checkpoint: yes.
  /// Throws: what the stream throws (serve handles it).
  shoal::Task<void> serve(shoal::net::Stream conn) {
    conn.set_idle_timeout(limits_.idle);  // a read or a write that stalls this long fails
    conn.set_nodelay(true);  // each room line goes out at once, not behind the client's delayed ACK
    shoal::net::BufferedReader in(conn);
    auto nick = co_await in.read_line(64);
    if (!nick || nick->empty()) co_return;
    auto rx = out_.subscribe();  // before the join notice: the newcomer sees its own join
    // Each Line is named before the co_await that takes it: g++ 12 builds a
    // class-type temporary inside a co_await expression at one address and
    // moves it from another (docs/task_sets.md).
    Line joined{"", *nick + " joined"};
    const bool open = co_await post(std::move(joined));
    if (!open) co_return;
    bool too_long = false;
    // Waiting in the select is not a read, so the stream's idle limit does
    // not count it: the loop keeps its own deadline, moved by each line.
    auto silent_until = shoal::now() + limits_.idle;
    try {
      for (;;) {
        auto r = co_await shoal::select(shoal::net::on_readable(in), shoal::on_recv(rx),
                                        shoal::on_deadline(silent_until));
        if (r.index() == 0) {
          // The rest of a partial line is waited for here (the stream's idle
          // limit bounds it); the room's lines wait in rx meanwhile.
          auto line = co_await in.next_line(limits_.max_line);
          if (!line) break;  // the client left
          silent_until = shoal::now() + limits_.idle;
          Line said{*nick, std::string(*line)};
          // A closed room's last lines are in rx, which then ends the loop.
          (void)co_await post(std::move(said));
        } else if (r.index() == 1) {
          auto msg = std::get<1>(std::move(r));
          if (msg.closed()) break;  // the room closed
          if (msg.lagged()) {
            co_await conn.write_all("* you missed " + std::to_string(msg.missed()) + " lines\n");
          } else {
            co_await conn.write_all(*msg);
          }
        } else {
          co_await conn.write_all(std::string_view("* you were idle too long\n"));
          break;
        }
      }
    } catch (const shoal::net::LineTooLong&) {
      too_long = true;  // co_await is not allowed in a handler: answer below
    }
    if (too_long) co_await conn.write_all("* line too long\n");
    Line left{"", *nick + " left"};
    (void)co_await post(std::move(left));
    // The rest of a long line may still be coming: a plain close would reset
    // the connection, and the client could lose the notice unread.
    if (too_long) co_await conn.linger_close(std::chrono::seconds(1));
  }

 private:
  // False once the room is closed.
  shoal::Task<bool> post(Line line) {
    try {
      co_await incoming_.send(std::move(line));
      co_return true;
    } catch (const shoal::ChannelClosed&) {
      co_return false;
    }
  }

  Limits limits_;
  shoal::Channel<Line> incoming_;
  shoal::Broadcast<std::string> out_;
};

}  // namespace chat
