// shoal::tls against itself and against real peers: openssl s_server and
// s_client, and curl. The certificates (a CA, a server certificate for
// localhost and 127.0.0.1, an expired one) are made at test time with the
// openssl command line.
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "shoal/http/https.hpp"
#include "shoal/shoal.hpp"
#include "shoal/tls/serve.hpp"
#include "shoal/tls/tls.hpp"
#include "support/process_stats.hpp"
#include "support/stream_io.hpp"
#include "support/test_certs.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::read_to_end;

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
namespace tls = shoal::tls;
namespace process = shoal::process;

using shoal::test::certs;

SHOAL_TEST_SUITE(Tls);

tls::Context server_context(const std::string& cert, std::vector<std::string> alpn = {}) {
  tls::ServerOptions o;
  o.certificate_chain_file = cert;
  o.private_key_file = certs().key;
  o.alpn = std::move(alpn);
  return tls::Context::server(o);
}

tls::Context client_context(std::vector<std::string> alpn = {}) {
  tls::ClientOptions o;
  o.ca_file = certs().ca;
  o.alpn = std::move(alpn);
  return tls::Context::client(o);
}

/// Expects `task` to throw tls::Error whose message holds every one of `parts`.
Task<void> expect_tls_error(Task<void> task, const std::vector<std::string>& parts) {
  try {
    co_await std::move(task);
    ADD_FAILURE() << "no error; expected one saying " << parts[0];
  } catch (const tls::Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

/// A TCP connection to `addr`, then a TLS client handshake for `host`.
/// (Each step named: g++ 12 miscompiles some nested co_await forms, docs/task_sets.md.)
Task<tls::Stream> dial(Address addr, tls::Context ctx, std::string host, std::chrono::milliseconds timeout = 10s) {
  shoal::net::Stream sock = co_await shoal::net::connect(addr);
  tls::Stream s = co_await tls::connect(std::move(sock), ctx, std::move(host), timeout);
  co_return s;
}

/// Accepts one connection on `l` and performs the server handshake.
Task<tls::Stream> answer(Listener& l, tls::Context ctx) {
  shoal::net::Stream sock = co_await l.accept();
  tls::Stream s = co_await tls::accept(std::move(sock), ctx, 10s);
  co_return s;
}

/// A shoal TLS server for one connection: accepts, answers `reply`, closes cleanly.
Task<void> serve_once(Listener& l, tls::Context ctx, std::string reply) {
  try {
    tls::Stream s = co_await answer(l, ctx);
    co_await s.write_all(reply);
    co_await s.shutdown();
  } catch (const tls::Error&) {
    // the client refused us: what the client's side of the test checks
  }
}

SHOAL_TEST(Tls, AShoalClientAndServerTalkAndAgreeOnAlpn) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn([&]() -> Task<void> {
      const std::vector<std::string> offered{"h2", "http/1.1"};
      tls::Stream s = co_await answer(l, server_context(certs().cert, offered));
      EXPECT_EQ(s.alpn(), "http/1.1");
      std::vector<std::byte> buf(64);
      const std::size_t n = co_await s.read_some(buf);
      co_await s.write_all(std::string("echo: ") + std::string(reinterpret_cast<const char*>(buf.data()), n));
      co_await s.shutdown();
    });
    const std::vector<std::string> wanted{"http/1.1"};
    tls::Stream c = co_await dial(l.local_address(), client_context(wanted), "localhost");
    EXPECT_EQ(c.alpn(), "http/1.1");
    co_await c.write_all(std::string_view("hello"));
    EXPECT_EQ(co_await read_to_end(c), "echo: hello") << "a clean close_notify reads as end of stream";
  });
}

// The default profile offers TLS 1.2 with ECDHE and AEAD suites only: a
// client that offers nothing but CBC suites (TLS 1.2 at most) is refused.
SHOAL_TEST(Tls, TheDefaultProfileRefusesAClientThatOffersOnlyCbcSuites) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(serve_once(l, server_context(certs().cert), "no"));
    tls::ClientOptions o;
    o.ca_file = certs().ca;
    o.profile.tls12_ciphers = "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:AES128-SHA:AES256-SHA256";  // CBC only
    tls::Context cbc_only = tls::Context::client(o);
    SSL_CTX_set_max_proto_version(cbc_only.native(), TLS1_2_VERSION);
    auto attempt = [&]() -> Task<void> { (void)co_await dial(l.local_address(), cbc_only, "localhost"); };
    const std::vector<std::string> says{"localhost", "handshake failure"};
    co_await expect_tls_error(attempt(), says);
  });
  // The same client, allowed an AEAD suite, is served: the refusal was the suites.
  auto l2 = Listener::bind(Address::parse("127.0.0.1:0"));
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(serve_once(l2, server_context(certs().cert), "ok"));
    tls::ClientOptions o;
    o.ca_file = certs().ca;
    o.profile.tls12_ciphers = "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256";
    tls::Context with_aead = tls::Context::client(o);
    SSL_CTX_set_max_proto_version(with_aead.native(), TLS1_2_VERSION);
    tls::Stream c = co_await dial(l2.local_address(), with_aead, "localhost");
    EXPECT_EQ(co_await read_to_end(c), "ok");
  });
}

TEST(TlsProfile, ASettingOpensslRefusesIsNamed) {
  tls::ClientOptions o;
  o.profile.tls12_ciphers = "NO-SUCH-CIPHER";
  try {
    (void)tls::Context::client(o);
    ADD_FAILURE() << "accepted";
  } catch (const tls::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Profile::tls12_ciphers \"NO-SUCH-CIPHER\""), std::string::npos) << e.what();
  }
  tls::ClientOptions g;
  g.profile.groups = "P-999";
  try {
    (void)tls::Context::client(g);
    ADD_FAILURE() << "accepted";
  } catch (const tls::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Profile::groups"), std::string::npos) << e.what();
  }
}

SHOAL_TEST(Tls, AnIpAddressIsVerifiedAgainstTheCertificatesIpNames) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(serve_once(l, server_context(certs().cert), "ok"));
    tls::Stream c = co_await dial(l.local_address(), client_context(), "127.0.0.1");
    EXPECT_EQ(co_await read_to_end(c), "ok");
  });
}

SHOAL_TEST(Tls, AWrongHostNameFailsNamingTheHostAndTheReason) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(serve_once(l, server_context(certs().cert), "no"));
    auto attempt = [&]() -> Task<void> { (void)co_await dial(l.local_address(), client_context(), "wrong.example"); };
    const std::vector<std::string> says{"wrong.example", "certificate verify failed", "hostname mismatch"};
    co_await expect_tls_error(attempt(), says);
  });
}

SHOAL_TEST(Tls, AnExpiredCertificateFailsSayingSo) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(serve_once(l, server_context(certs().expired), "no"));
    auto attempt = [&]() -> Task<void> { (void)co_await dial(l.local_address(), client_context(), "localhost"); };
    const std::vector<std::string> says{"localhost", "certificate has expired"};
    co_await expect_tls_error(attempt(), says);
  });
}

SHOAL_TEST(Tls, VerificationIsOnByDefaultAgainstTheSystemStore) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(serve_once(l, server_context(certs().cert), "no"));
    // The test CA is in no system store.
    auto attempt = [&]() -> Task<void> { (void)co_await dial(l.local_address(), tls::Context::client(), "localhost"); };
    const std::vector<std::string> says{"certificate verify failed", "local issuer"};
    co_await expect_tls_error(attempt(), says);
  });
}

SHOAL_TEST(Tls, APeerThatStallsMidHandshakeTimesOutAndACancelledHandshakeFreesEverything) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  const int fds_before = shoal::test::open_fds();
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    std::vector<shoal::net::Stream> silent;  // accepted, never answered (only the accepting task touches it)
    std::atomic<int> accepted{0};
    sc.spawn([&]() -> Task<void> {
      for (int i = 0; i < 2; ++i) {
        silent.push_back(co_await l.accept());
        accepted.fetch_add(1, std::memory_order_release);
      }
    });
    auto attempt = [&]() -> Task<void> { (void)co_await dial(l.local_address(), client_context(), "localhost", 100ms); };
    const std::vector<std::string> says{"localhost", "timed out after 100 ms"};
    co_await expect_tls_error(attempt(), says);
    // A handshake cancelled mid-way: its socket and OpenSSL state are freed.
    shoal::CancelScope cut;
    co_await shoal::scope([&](shoal::Scope& inner) -> Task<void> {
      inner.spawn([&]() -> Task<void> {
        auto stalled = [&]() -> Task<void> { (void)co_await dial(l.local_address(), client_context(), "localhost"); };
        (void)co_await cut.run(stalled());
      });
      while (accepted.load(std::memory_order_acquire) < 2) co_await shoal::checkpoint();  // the second handshake has begun
      cut.cancel();
      co_return;
    });
    EXPECT_TRUE(cut.cancelled_caught()) << "the handshake should have been cut by the cancellation";
    silent.clear();
  });
  EXPECT_EQ(shoal::test::open_fds(), fds_before) << "a descriptor outlived the cancelled handshake";
}

SHOAL_TEST(Tls, APeerClosingWithoutCloseNotifyIsReportedAsTruncation) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn([&]() -> Task<void> {
      tls::Stream s = co_await answer(l, server_context(certs().cert));
      co_await s.write_all(std::string_view("partial"));
      s.socket().close();  // no close_notify
    });
    tls::Stream c = co_await dial(l.local_address(), client_context(), "localhost");
    auto attempt = [&]() -> Task<void> { (void)co_await read_to_end(c); };
    const std::vector<std::string> says{"without close_notify"};
    co_await expect_tls_error(attempt(), says);
  });
}

// tls::Stream is a ByteStream: protocol code over bytes reads it as a socket.
SHOAL_TEST(Tls, ABufferedReaderReadsLinesOverTls) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  std::vector<std::string> lines;
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(serve_once(l, server_context(certs().cert), "one\r\ntwo\n\nthree"));
    tls::Stream c = co_await dial(l.local_address(), client_context(), "localhost");
    shoal::net::BufferedReader in(c, 64);
    while (auto line = co_await in.next_line(100)) lines.emplace_back(*line);
  });
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "", "three"}));
}

// Decrypted bytes left in the connection after a short read make it
// readable although the socket is drained: the server sends two lines in
// one record and then waits, so only those bytes can complete the case.
SHOAL_TEST(Tls, BytesLeftDecryptedMakeTheStreamReadableForASelect) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  shoal::Event done;
  std::size_t index = 99;
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn([&]() -> Task<void> {
      tls::Stream s = co_await answer(l, server_context(certs().cert));
      co_await s.write_all(std::string_view("one\ntwo\n"));
      co_await done.wait();
    });
    tls::Stream c = co_await dial(l.local_address(), client_context(), "localhost");
    std::vector<char> buf(4);
    std::size_t got = 0;
    while (got < 4) got += co_await c.read_some(std::as_writable_bytes(std::span(buf)).subspan(got));
    EXPECT_EQ(std::string(buf.data(), 4), "one\n");
    auto r = co_await shoal::select(tls::on_readable(c), shoal::on_timeout(10s));
    index = r.index();
    done.set();
  });
  EXPECT_EQ(index, 0u) << "the decrypted \"two\\n\" did not make the stream readable";
}

// A refusal while the client still sends: the reply and the close_notify
// arrive, no reset destroys them.
SHOAL_TEST(Tls, LingerCloseLetsAClientStillSendingReadTheLastReplyAndTheCloseNotify) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  std::string got;
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn([&]() -> Task<void> {
      tls::Stream s = co_await answer(l, server_context(certs().cert));
      std::byte first[16];
      (void)co_await s.read_some(first);  // the start of what the client sends: the rest stays unread
      co_await s.write_all(std::string_view("refused\n"));
      co_await s.linger_close(2s);
      EXPECT_FALSE(s.is_open()) << "linger_close closes";
    });
    tls::Stream c = co_await dial(l.local_address(), client_context(), "localhost");
    const std::string junk(256 * 1024, 'x');
    co_await c.write_all(junk);  // far more than the server reads
    got = co_await read_to_end(c);  // a reset would throw; a truncation would throw tls::Error
    c.close();
  });
  EXPECT_EQ(got, "refused\n");
}

// ---- real peers ---------------------------------------------------------------

struct Ran {
  process::ExitStatus status;
  std::string out;
};

SHOAL_TEST(Tls, AClientTalksToOpensslSServer) {
  (void)certs();
  // A free port for s_server: bound, read, released.
  int port = 0;
  {
    auto probe = Listener::bind(Address::parse("127.0.0.1:0"));
    const std::string a = probe.local_address().to_string();
    port = std::stoi(a.substr(a.rfind(':') + 1));
  }
  process::Options opts;
  opts.in = process::Stdio::null;
  opts.out = process::Stdio::pipe;
  opts.err = process::Stdio::null;
  const std::vector<std::string> argv{"openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port), "-cert",
                                      certs().cert, "-key", certs().key, "-www", "-naccept", "1"};
  auto server = process::spawn(argv, opts);
  std::string banner;
  std::vector<char> buf(256);
  while (banner.find("ACCEPT") == std::string::npos) {
    const std::size_t n = co_await server.out().read_some(std::as_writable_bytes(std::span(buf)));
    SHOAL_CO_ASSERT(n > 0);  // else s_server died before accepting
    banner.append(buf.data(), n);
  }
  tls::Stream c = co_await dial(Address::parse("127.0.0.1:" + std::to_string(port)), client_context(), "localhost");
  co_await c.write_all(std::string_view("GET / HTTP/1.0\r\n\r\n"));
  std::string page;
  try {
    page = co_await read_to_end(c);
  } catch (const tls::Error& e) {
    ADD_FAILURE() << e.what();
  }
  EXPECT_EQ(page.rfind("HTTP/1.0 200 ok", 0), 0u) << page.substr(0, 80);
  server.kill();  // s_server -www keeps listening after its one connection
  (void)co_await server.wait();
}

SHOAL_TEST(Tls, OpensslSClientAndCurlVerifyAndTalkToAShoalServer) {
  (void)certs();
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  const std::string port = [&] {
    const std::string a = l.local_address().to_string();
    return a.substr(a.rfind(':') + 1);
  }();
  const auto ctx = server_context(certs().cert, {"http/1.1"});
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn([&]() -> Task<void> {
      for (int i = 0; i < 2; ++i) {
        tls::Stream s = co_await answer(l, ctx);
        std::string request;
        std::vector<std::byte> buf(4096);
        while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos) {
          const std::size_t n = co_await s.read_some(buf);
          if (n == 0) break;
          request.append(reinterpret_cast<const char*>(buf.data()), n);
        }
        co_await s.write_all(std::string_view(
            "HTTP/1.1 200 OK\r\nContent-Length: 17\r\nConnection: close\r\n\r\nhello over tls 1\n"));
        co_await s.shutdown();
      }
    });
    process::Options opts;
    opts.in = process::Stdio::pipe;
    opts.out = process::Stdio::pipe;
    opts.err = process::Stdio::null;
    const std::vector<std::string> s_client{"openssl", "s_client", "-connect", "127.0.0.1:" + port, "-servername",
                                            "localhost", "-verify_hostname", "localhost", "-CAfile", certs().ca,
                                            "-verify_return_error", "-alpn", "http/1.1", "-quiet"};
    auto c1 = process::spawn(s_client, opts);
    co_await c1.in().write_all(std::string_view("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    const std::string out1 = co_await read_to_end(c1.out());
    c1.in().close();
    EXPECT_NE(out1.find("hello over tls 1"), std::string::npos) << out1;
    (void)co_await c1.wait();
    const std::vector<std::string> curl{"curl", "-sS", "--cacert", certs().ca, "https://localhost:" + port + "/"};
    auto c2 = process::spawn(curl, opts);
    c2.in().close();
    const std::string out2 = co_await read_to_end(c2.out());
    const auto st = co_await c2.wait();
    EXPECT_TRUE(st.success()) << st.to_string();
    EXPECT_EQ(out2, "hello over tls 1\n");
  });
}

// ---- one stream, a reader and a writer at once --------------------------------

SHOAL_TEST(Tls, AReaderAndAWriterRunAtOnceOnOneStream) {
  // 8 MiB through an echo: the peer writes back as it reads, so a client
  // that could not read while it writes would stall with both socket
  // buffers full; on 4 workers the two run on different threads.
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  constexpr std::size_t kTotal = 8u << 20;
  std::string data(kTotal, '\0');
  for (std::size_t i = 0; i < kTotal; ++i) data[i] = static_cast<char>((i * 31 + i / 4096) % 251);
  std::string received;
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn([&]() -> Task<void> {
      tls::Stream s = co_await answer(l, server_context(certs().cert));
      std::vector<std::byte> buf(16384);
      for (std::size_t n; (n = co_await s.read_some(buf)) != 0;) {
        const std::span<const std::byte> got(buf.data(), n);
        co_await s.write_all(got);
      }
      co_await s.shutdown();
    });
    tls::Stream c = co_await dial(l.local_address(), client_context(), "localhost");
    co_await shoal::scope([&](shoal::Scope& pair) -> Task<void> {
      pair.spawn([&]() -> Task<void> { received = co_await read_to_end(c); });
      for (std::size_t off = 0; off < kTotal; off += 100'000) {
        co_await c.write_all(std::string_view(data).substr(off, 100'000));
      }
      co_await c.shutdown();
    });
  });
  EXPECT_EQ(received.size(), kTotal);
  EXPECT_TRUE(received == data) << "the echo came back altered or out of order";
}

SHOAL_TEST(Tls, AWriteCutByCancellationLeavesAStreamThatSaysItIsBroken) {
  // Socket buffers far smaller than one 64 KiB piece of the write, and a
  // peer that never reads: the first piece can never all go out, so once
  // any byte of it has, the write waits inside that piece's socket write,
  // and the cut leaves part of a record out. (A cut between two pieces
  // would leave the stream usable.)
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  const int small = 2048;
  SHOAL_CO_ASSERT(::setsockopt(l.native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
  shoal::Event done;
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn([&]() -> Task<void> {
      tls::Stream s = co_await answer(l, server_context(certs().cert));
      co_await done.wait();  // never reads
    });
    tls::Stream c = co_await dial(l.local_address(), client_context(), "localhost");
    SHOAL_CO_ASSERT(::setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
    const std::string big(1u << 20, 'x');
    auto write_big = [&]() -> Task<void> { co_await c.write_all(big); };
    shoal::CancelScope cut;
    co_await shoal::scope([&](shoal::Scope& inner) -> Task<void> {
      inner.spawn([&]() -> Task<void> { (void)co_await cut.run(write_big()); });
      for (;;) {
        pollfd p{c.socket().native_handle(), POLLOUT, 0};
        if (::poll(&p, 1, 0) == 0) break;  // the send buffer is full: bytes of the first piece are out
        co_await shoal::sleep_for(1ms);
      }
      cut.cancel();
    });
    EXPECT_TRUE(cut.cancelled_caught()) << "a write to a peer that does not read should not finish";
    auto attempt = [&]() -> Task<void> { co_await c.write_all(std::string_view("more")); };
    const std::vector<std::string> says{"localhost", "a write was cut off part-way"};
    co_await expect_tls_error(attempt(), says);
    done.set();
  });
}

// ---- tls::serve and HTTPS -------------------------------------------------------

std::string port_of(const Listener& l) {
  const std::string a = l.local_address().to_string();
  return a.substr(a.rfind(':') + 1);
}

/// The HTTPS server the tests below talk to: answers "secure <target>".
struct Echoing {
  void operator()(const shoal::http::Request& req, shoal::http::Response& res) const {
    res.body = "secure " + std::string(req.target());
  }
};

SHOAL_TEST(Tls, HttpsServesCurlTwoRequestsOnOneKeptAliveConnection) {
  (void)certs();
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  const std::string port = port_of(l);
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.shutdown = &stop;
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(shoal::http::serve(l, options, shoal::http::ServerOptions{}, server_context(certs().cert, {"http/1.1"}),
                                Echoing{}));
    process::Options opts;
    opts.in = process::Stdio::null;
    opts.out = process::Stdio::pipe;
    opts.err = process::Stdio::null;
    const std::vector<std::string> curl{"curl", "-sS", "--cacert", certs().ca, "-w", " connects=%{num_connects}\n",
                                        "https://localhost:" + port + "/a", "https://localhost:" + port + "/b"};
    auto client = process::spawn(curl, opts);
    const std::string out = co_await read_to_end(client.out());
    const auto st = co_await client.wait();
    EXPECT_TRUE(st.success()) << st.to_string();
    EXPECT_EQ(out, "secure /a connects=1\nsecure /b connects=0\n") << "the second request reuses the connection";
    stop.trigger();
  });
}

SHOAL_TEST(Tls, HttpsShutdownClosesAnIdleKeptAliveConnectionAtOnceWithCloseNotify) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.shutdown = &stop;
  options.grace_period = std::chrono::hours(1);  // waiting it out would hang the test
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(shoal::http::serve(l, options, shoal::http::ServerOptions{}, server_context(certs().cert), Echoing{}));
    tls::Stream c = co_await dial(l.local_address(), client_context(), "localhost");
    co_await c.write_all(std::string_view("GET /idle HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    std::string answer;
    std::vector<std::byte> buf(4096);
    while (answer.find("secure /idle") == std::string::npos) {
      const std::size_t n = co_await c.read_some(buf);
      SHOAL_CO_ASSERT(n > 0);
      answer.append(reinterpret_cast<const char*>(buf.data()), n);
    }
    EXPECT_EQ(answer.find("Connection: close"), std::string::npos) << "kept alive before the shutdown";
    stop.trigger();
    EXPECT_EQ(co_await c.read_some(buf), 0u) << "the server ends the idle connection with close_notify";
  });
}

SHOAL_TEST(Tls, APlainTextClientOfATlsServerIsClosedQuietlyAndOthersAreServed) {
  auto l = Listener::bind(Address::parse("127.0.0.1:0"));
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.shutdown = &stop;
  std::atomic<int> faults{0};
  options.on_handler_fault = [&](std::exception_ptr, const Address&) { faults.fetch_add(1); };
  auto greet = [](tls::Stream s) -> Task<void> {
    co_await s.write_all(std::string_view("hi"));
    co_await s.shutdown();
  };
  co_await shoal::scope([&](shoal::Scope& sc) -> Task<void> {
    sc.spawn(tls::serve(l, options, server_context(certs().cert), greet, 10s));
    shoal::net::Stream plain = co_await shoal::net::connect(l.local_address());
    co_await plain.write_all(std::string_view("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    try {
      (void)co_await read_to_end(plain);  // an alert, then the end
    } catch (const std::system_error&) {
      // or a reset: closed either way
    }
    tls::Stream c = co_await dial(l.local_address(), client_context(), "localhost");
    EXPECT_EQ(co_await read_to_end(c), "hi");
    stop.trigger();
  });
  EXPECT_EQ(faults.load(), 0) << "a failed handshake is not a handler fault";
}

}  // namespace
