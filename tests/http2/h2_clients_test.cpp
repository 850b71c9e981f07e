// shoal::http2 driven by real HTTP/2 clients nobody here wrote: curl (with
// prior knowledge of h2c), nghttp and h2load (Debian's nghttp2-client) and
// Node's http2 module, each as a child process against an in-process server;
// and shoal's own client (http2::connect) against the server and nghttpd.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "shoal/http.hpp"
#include "http2/h2_support.hpp"
#include "http/streaming_handlers.hpp"
#include "shoal/http2/client.hpp"
#include "shoal/http2/server.hpp"
#include "shoal/process/process.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/sync/event.hpp"
#include "shoal/time/sleep.hpp"
#if SHOAL_TEST_TLS
#include "shoal/http2/https.hpp"
#endif
#include "support/client_process.hpp"
#include "support/test_certs.hpp"
#include "http2/h2_frames.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::test::have;
using shoal::test::Ran;
using shoal::test::run_client;
using shoal::test::with_h2_server;
namespace http = shoal::http;
namespace http2 = shoal::http2;

SHOAL_TEST_SUITE(Http2Clients);

/// Echoes "<METHOD> <target> <body>"; /fail throws; /status/N answers N.
struct Echo {
  void operator()(const http::Request& req, http::Response& res) const {
    if (req.target() == "/fail") throw std::runtime_error("the handler failed on purpose");
    if (req.target().starts_with("/status/")) {
      res.status = std::stoi(std::string(req.target().substr(8)));
      return;
    }
    res.set_header("X-Host", req.header("host"));
    res.body.append(req.method()).append(" ").append(req.target()).append(" ").append(req.body());
  }
};

std::string url(const std::string& addr, const std::string& path) { return "http://" + addr + path; }

SHOAL_TEST(Http2Clients, CurlWithPriorKnowledgeGetsTheHandlersAnswerOverHttp2) {
  if (!have("curl")) co_return;
  co_await with_h2_server({}, Echo{}, [](std::string addr) -> Task<void> {
    const std::vector<std::string> argv{"curl", "-sS", "--http2-prior-knowledge", "-D", "-", url(addr, "/hello?x=1")};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_TRUE(r.out.starts_with("HTTP/2 200 \r\n")) << r.out;
    EXPECT_NE(r.out.find("content-length: 15\r\n"), std::string::npos) << r.out;
    const std::size_t date = r.out.find("\r\ndate: ");
    EXPECT_TRUE(date != std::string::npos && r.out.find(" GMT\r\n", date) != std::string::npos) << r.out;
    EXPECT_NE(r.out.find("x-host: " + addr + "\r\n"), std::string::npos) << r.out;  // :authority as Host
    EXPECT_TRUE(r.out.ends_with("\r\n\r\nGET /hello?x=1 ")) << r.out;
  });
}

SHOAL_TEST(Http2Clients, CurlPostsATenMebibyteBodyThroughTheStreamWindow) {
  if (!have("curl")) co_return;
  http::ServerOptions o;
  o.max_body = 16 << 20;
  co_await with_h2_server(o, Echo{}, [](std::string addr) -> Task<void> {
    std::string body(10 << 20, 'b');
    for (std::size_t i = 0; i < body.size(); i += 4096) body[i] = static_cast<char>('a' + (i / 4096) % 26);
    const std::vector<std::string> argv{"curl", "-sS", "--http2-prior-knowledge", "--data-binary", "@-",
                                        url(addr, "/up")};
    const Ran r = co_await run_client(argv, body);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out.size(), 9 + body.size());
    EXPECT_TRUE(r.out == "POST /up " + body) << r.out.substr(0, 80);
  });
}

SHOAL_TEST(Http2Clients, ABodyPastMaxBodyIsAnswered413AndTheConnectionServesOn) {
  if (!have("nghttp")) co_return;
  http::ServerOptions o;
  o.max_body = 1000;
  co_await with_h2_server(o, Echo{}, [](std::string addr) -> Task<void> {
    // Two requests on one connection (nghttp's -d sends the same data with each URI).
    const std::vector<std::string> argv{"nghttp", "-n", "-s", "-d", "-", url(addr, "/big"), url(addr, "/again")};
    const Ran r = co_await run_client(argv, std::string(5000, 'x'));
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err << r.out;
    // nghttp's -s table: a line per request, "... code size path"; both
    // answered on the one connection, each refused on its own stream.
    EXPECT_NE(r.out.find("  413   23 /big\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  413   23 /again\n"), std::string::npos) << r.out;
  });
}

SHOAL_TEST(Http2Clients, AHandlerFailureAnswersItsStream500AndTheOthersServeOn) {
  if (!have("curl")) co_return;
  co_await with_h2_server({}, Echo{}, [](std::string addr) -> Task<void> {
    // One connection, three streams (curl multiplexes over --parallel).
    const std::vector<std::string> argv{"curl",          "-sS", "--http2-prior-knowledge", "--parallel",
                                        "--parallel-immediate",
                                        "-w",            "%{http_code} %{http_version}\\n",
                                        "-o",            "/dev/null", url(addr, "/a"),
                                        "-o",            "/dev/null", url(addr, "/fail"),
                                        "-o",            "/dev/null", url(addr, "/status/204")};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    for (const char* want : {"200 2\n", "500 2\n", "204 2\n"}) EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  });
}

SHOAL_TEST(Http2Clients, H2loadCompletesAThousandRequestsAHundredStreamsAtATime) {
  if (!have("h2load")) co_return;
  co_await with_h2_server({}, Echo{}, [](std::string addr) -> Task<void> {
    const std::vector<std::string> argv{"h2load", "-n", "1000", "-c", "1", "-m", "100", url(addr, "/")};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err << r.out;
    EXPECT_NE(r.out.find("1000 total, 1000 started, 1000 done, 1000 succeeded, 0 failed, 0 errored"),
              std::string::npos)
        << r.out;
  });
}

SHOAL_TEST(Http2Clients, OnePortServesHttp11AndHttp2ByPriorKnowledge) {
  if (!have("curl")) co_return;
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const std::string addr = listener.local_address().to_string();
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  http::ServerOptions options;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(http2::serve(listener, opts, options, Echo{}));
    // Named first: g++ 12 miscompiles a braced list inside co_await (docs/compilers.md).
    const std::vector<std::string> h2{"curl", "-sS", "--http2-prior-knowledge", "-w", " %{http_version}",
                                      url(addr, "/two")};
    const std::vector<std::string> h1{"curl", "-sS", "--http1.1", "-w", " %{http_version}", url(addr, "/one")};
    const Ran r2 = co_await run_client(h2);
    const Ran r1 = co_await run_client(h1);
    EXPECT_EQ(r2.out, "GET /two  2") << r2.err;
    EXPECT_EQ(r1.out, "GET /one  1.1") << r1.err;
    stop.trigger();
  });
}

#if SHOAL_TEST_TLS
/// The test certificate, offering h2 and http/1.1 by ALPN.
shoal::tls::Context h2_tls_server() {
  shoal::tls::ServerOptions o;
  o.certificate_chain_file = shoal::test::certs().cert;
  o.private_key_file = shoal::test::certs().key;
  o.alpn = {"h2", "http/1.1"};
  return shoal::tls::Context::server(o);
}

/// A client context that trusts the test CA and offers h2 only.
shoal::tls::Context h2_tls_client() {
  shoal::tls::ClientOptions o;
  o.ca_file = shoal::test::certs().ca;
  o.alpn = {"h2"};
  return shoal::tls::Context::client(o);
}

SHOAL_TEST(Http2Clients, CurlOverTlsGetsHttp2ByAlpnAndHttp11WhenItAsksForIt) {
  if (!have("curl")) co_return;
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const std::string port = std::to_string(listener.local_address().port());
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  http::ServerOptions options;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(http2::serve(listener, opts, options, h2_tls_server(), Echo{}));
    const std::string https = "https://127.0.0.1:" + port;
    const std::vector<std::string> h2{"curl", "-sS", "--http2", "--cacert", shoal::test::certs().ca,
                                      "-w", " %{http_version}", https + "/two"};
    const std::vector<std::string> h1{"curl", "-sS", "--http1.1", "--cacert", shoal::test::certs().ca,
                                      "-w", " %{http_version}", https + "/one"};
    const Ran r2 = co_await run_client(h2);
    const Ran r1 = co_await run_client(h1);
    EXPECT_EQ(r2.out, "GET /two  2") << r2.err;
    EXPECT_EQ(r1.out, "GET /one  1.1") << r1.err;
    stop.trigger();
  });
}

SHOAL_TEST(Http2Clients, AClientThatEndsTlsWithoutCloseNotifyIsGoneNotAFault) {
  // curl and browsers end an h2 connection without close_notify: HTTP/2
  // frames its own end, so the server must not report it as a failure.
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  http::Server server(http::ServerOptions{});
  const shoal::tls::Context server_ctx = h2_tls_server();
  Echo handler;
  bool served = false;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      shoal::net::Stream tcp = co_await listener.accept();
      shoal::tls::Stream conn = co_await shoal::tls::accept(std::move(tcp), server_ctx, std::chrono::seconds(10));
      co_await http2::serve_connection(server, std::move(conn), handler);  // throws if it calls the end a failure
      served = true;
    });
    const shoal::tls::Context ctx = h2_tls_client();
    shoal::net::Stream tcp = co_await shoal::net::connect(addr);
    shoal::tls::Stream tls = co_await shoal::tls::connect(std::move(tcp), ctx, "127.0.0.1");
    co_await tls.write_all(std::string(shoal::http2::kClientPreface) + shoal::test::h2::frame(shoal::test::h2::kSettings, 0, 0, ""));
    std::vector<std::byte> buf(4096);
    EXPECT_GT(co_await tls.read_some(buf), 0u) << "the server's SETTINGS";
    tls.close();  // no close_notify
  });
  EXPECT_TRUE(served);
}

SHOAL_TEST(Http2Clients, TheClientSpeaksHttp2OverTlsAfterAlpnChoseH2) {
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(http2::serve(listener, opts, http::ServerOptions{}, h2_tls_server(), Echo{}));
    const shoal::tls::Context ctx = h2_tls_client();
    shoal::net::Stream tcp = co_await shoal::net::connect(addr);
    shoal::tls::Stream tls = co_await shoal::tls::connect(std::move(tcp), ctx, "127.0.0.1");
    EXPECT_EQ(tls.alpn(), "h2");
    http2::ClientOptions options;
    options.authority = addr.to_string();
    co_await http2::connect(
        tls,
        [](http2::Client& c) -> Task<void> {
          const http2::ClientResponse r = co_await c.get("/secure");
          EXPECT_EQ(r.status, 200);
          EXPECT_EQ(r.body, "GET /secure ");
        },
        options);
    stop.trigger();
  });
}
#endif

/// Counts the handlers running at once; each waits until two have run
/// side by side (a server running one stream at a time never gets there,
/// and the client gives up).
struct Concurrency {
  std::atomic<int>* now;
  std::atomic<int>* most;
  shoal::Event* two;
  Task<void> operator()(const http::Request&, http::Response& res) const {
    const int n = now->fetch_add(1) + 1;
    int seen = most->load();
    while (n > seen && !most->compare_exchange_weak(seen, n)) {
    }
    if (n >= 2) two->set();
    co_await two->wait();
    now->fetch_sub(1);
    res.body = "ok";
  }
};

SHOAL_TEST(Http2Clients, NodeRunsStreamsOfOneConnectionInParallelUpToTheAdvertisedLimit) {
  if (!have("node")) co_return;
  std::atomic<int> now{0}, most{0};
  shoal::Event two;
  http::ServerOptions o;
  o.max_concurrent_streams = 8;
  co_await with_h2_server(o, Concurrency{&now, &most, &two}, [](std::string addr) -> Task<void> {
    const char* script = R"JS(
const http2 = require('http2');
const client = http2.connect('http://' + process.argv[1]);
client.on('error', (e) => { console.error('node: ' + e.message); process.exit(1); });
client.on('remoteSettings', (s) => {
  const limit = s.maxConcurrentStreams;
  let done = 0, ok = 0;
  for (let i = 0; i < 32; ++i) {
    const req = client.request({':path': '/' + i});
    let body = '';
    req.setEncoding('utf8');
    req.on('response', (h) => { if (h[':status'] === 200) ++ok; });
    req.on('data', (d) => body += d);
    req.on('end', () => { if (++done === 32) { console.log(`limit=${limit} ok=${ok}`); client.close(); } });
    req.end();
  }
});
)JS";
    const std::vector<std::string> argv{"node", "-e", script, addr};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out, "limit=8 ok=32\n") << r.err;
  });
  EXPECT_LE(most.load(), 8);  // never more handlers than the advertised limit
}

/// gRPC's shape: a body in messages written as they are made, and the
/// status in a trailer.
struct Messages {
  Task<void> operator()(const http::Request&, http::Response& res) const {
    res.set_header("Content-Type", "application/grpc");
    for (const char* m : {"one ", "two ", "three"}) co_await res.write(m);
    res.set_trailer("grpc-status", "0");
    res.set_trailer("grpc-message", "done");
  }
};

SHOAL_TEST(Http2Clients, NodeReadsAStreamedBodyAndItsTrailers) {
  if (!have("node")) co_return;
  co_await with_h2_server({}, Messages{}, [](std::string addr) -> Task<void> {
    const char* script = R"JS(
const http2 = require('http2');
const client = http2.connect('http://' + process.argv[1]);
client.on('error', (e) => { console.error('node: ' + e.message); process.exit(1); });
const req = client.request({':path': '/'});
let body = '', type = '';
req.setEncoding('utf8');
req.on('response', (h) => { type = h['content-type']; });
req.on('data', (d) => body += d);
req.on('trailers', (t) => { console.log(`${type} ${body} status=${t['grpc-status']} message=${t['grpc-message']}`); });
req.on('end', () => client.close());
req.end();
)JS";
    const std::vector<std::string> argv{"node", "-e", script, addr};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out, "application/grpc one two three status=0 message=done\n") << r.err;
  });
}

// Python's h2 (a sans-I/O HTTP/2 state machine) on a socket of its own:
// `/usr/bin/python3 -c kPythonH2 ADDR MODE`. Push is off (ENABLE_PUSH 0); windows
// are given back as the data is read. "streams": 100 GETs at once, then a
// 2 MiB POST sent as the stream's window allows (curl and nghttp send 10). "reset": a body with
// trailers, then a stream reset after its first DATA, then a GET on the
// same connection.
constexpr const char* kPythonH2 = R"PY(
import socket, sys
import h2.config, h2.connection, h2.errors, h2.events, h2.settings
addr, mode = sys.argv[1], sys.argv[2]
host, port = addr.rsplit(':', 1)
sock = socket.create_connection((host, int(port)), timeout=30)
conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding='utf-8'))
conn.initiate_connection()
conn.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})
status, bodies, trailers, ended, resets = {}, {}, {}, set(), set()
first_data = []

def flush():
    out = conn.data_to_send()
    if out:
        sock.sendall(out)

def pump_once():
    data = sock.recv(1 << 16)
    if not data:
        sys.exit('python: the server closed the connection')
    for e in conn.receive_data(data):
        if isinstance(e, h2.events.ResponseReceived):
            status[e.stream_id] = dict(e.headers)[':status']
        elif isinstance(e, h2.events.DataReceived):
            bodies.setdefault(e.stream_id, bytearray()).extend(e.data)
            first_data.append(e.stream_id)
            conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        elif isinstance(e, h2.events.TrailersReceived):
            trailers[e.stream_id] = dict(e.headers)
        elif isinstance(e, h2.events.StreamEnded):
            ended.add(e.stream_id)
        elif isinstance(e, h2.events.StreamReset):
            resets.add(e.stream_id)
        elif isinstance(e, h2.events.ConnectionTerminated):
            sys.exit('python: GOAWAY %s' % e.error_code)
    flush()

def pump(until):
    while not until():
        pump_once()

def request(path, method='GET', end=True):
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(':method', method), (':scheme', 'http'), (':authority', addr), (':path', path)],
                      end_stream=end)
    return sid

flush()
if mode == 'streams':
    ids = [request('/%d' % i) for i in range(100)]
    flush()
    pump(lambda: all(i in ended for i in ids))
    ok = sum(1 for n, i in enumerate(ids) if status.get(i) == '200' and bytes(bodies.get(i, b'')) == b'GET /%d ' % n)
    sid = request('/upload', 'POST', end=False)
    body = memoryview(bytes(range(256)) * (2 << 12))
    at = 0
    while at < len(body):
        n = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(body) - at)
        if n > 0:
            conn.send_data(sid, body[at:at + n].tobytes())
            at += n
            flush()
        else:
            pump_once()  # until a WINDOW_UPDATE
    conn.end_stream(sid)
    flush()
    pump(lambda: sid in ended)
    echoed = bytes(bodies.get(sid, b''))
    print('ok=%d upload=%s' % (ok, 'same' if echoed == b'POST /upload ' + body.tobytes() else 'differs: %d bytes' % len(echoed)))
else:
    grpc = request('/grpc')
    flush()
    pump(lambda: grpc in ended)
    t = trailers.get(grpc, {})
    endless = request('/endless')
    flush()
    pump(lambda: endless in first_data)
    conn.reset_stream(endless, h2.errors.ErrorCodes.CANCEL)
    resets.add(endless)
    after = request('/after')
    flush()
    pump(lambda: after in ended)
    print('%s status=%s | %s %s' % (bytes(bodies[grpc]).decode(), t.get('grpc-status'), status.get(after),
                                   bytes(bodies.get(after, b'')).decode()))
conn.close_connection()
flush()
sock.close()
)PY";

/// /grpc: a body in messages and a status trailer (Messages); /endless:
/// writes until cancelled (and says so); else Echo.
struct ForPython {
  std::atomic<bool>* cancelled;
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() == "/grpc") {
      const Messages messages;
      co_await messages(req, res);
      co_return;
    }
    if (req.target() == "/endless") {
      try {
        for (;;) co_await res.write("tick\n");
      } catch (const shoal::Cancelled&) {
        cancelled->store(true);
        throw;
      }
    }
    Echo()(req, res);
  }
};

SHOAL_TEST(Http2Clients, PythonH2RunsAHundredStreamsAtOnceThenPostsTwoMebibytesThroughTheWindow) {
  if (!co_await shoal::test::have_python_module("h2")) co_return;
  std::atomic<bool> cancelled{false};
  http::ServerOptions o;
  o.max_body = 16 << 20;
  co_await with_h2_server(o, ForPython{&cancelled}, [](std::string addr) -> Task<void> {
    const std::vector<std::string> argv{shoal::test::kDebianPython, "-c", kPythonH2, addr, "streams"};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out, "ok=100 upload=same\n") << r.err;
  });
}

SHOAL_TEST(Http2Clients, PythonH2ReadsTrailersAndItsResetMidBodyCancelsOnlyThatStreamsHandler) {
  if (!co_await shoal::test::have_python_module("h2")) co_return;
  std::atomic<bool> cancelled{false};
  co_await with_h2_server({}, ForPython{&cancelled}, [](std::string addr) -> Task<void> {
    const std::vector<std::string> argv{shoal::test::kDebianPython, "-c", kPythonH2, addr, "reset"};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out, "one two three status=0 | 200 GET /after \n") << r.err;
  });
  EXPECT_TRUE(cancelled.load()) << "the reset stream's handler was not cancelled";
}

SHOAL_TEST(Http2Clients, CurlSeesTheTrailersOfAStreamedBody) {
  if (!have("curl")) co_return;
  co_await with_h2_server({}, Messages{}, [](std::string addr) -> Task<void> {
    const std::vector<std::string> argv{"curl", "-sS", "--http2-prior-knowledge", "-D", "-", url(addr, "/")};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out.find("content-length"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("one two three"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("grpc-status: 0\r\n"), std::string::npos) << r.out;
  });
}

/// Streamed request bodies: /hold waits for `counted` before it reads;
/// /count reads at once and then sets it. Each answers the bytes it read
/// and their sum.
struct Uploads {
  shoal::Event* counted;
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() == "/hold") co_await counted->wait();
    res.body = co_await shoal::test::count_body(req);
    if (req.target() == "/count") counted->set();
  }
};

http::ServerOptions streamed_bodies() {
  http::ServerOptions o;
  o.stream_request_body = true;
  o.max_body = 1000;  // a body read whole could not pass
  return o;
}

SHOAL_TEST(Http2Clients, CurlStreamsATenMebibyteUploadToAHandlerThatReadsAsItGoes) {
  if (!have("curl")) co_return;
  shoal::Event counted;
  co_await with_h2_server(streamed_bodies(), Uploads{&counted}, [](std::string addr) -> Task<void> {
    std::string body(10 << 20, 'b');
    for (std::size_t i = 0; i < body.size(); i += 4096) body[i] = static_cast<char>('a' + (i / 4096) % 26);
    const std::vector<std::string> argv{"curl", "-sS", "--http2-prior-knowledge", "--data-binary", "@-",
                                        url(addr, "/count")};
    const Ran r = co_await run_client(argv, body);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out, shoal::test::counted(body));
  });
}

SHOAL_TEST(Http2Clients, NodeSeesASlowReadersStreamStallOnlyItself) {
  if (!have("node")) co_return;
  shoal::Event counted;
  co_await with_h2_server(streamed_bodies(), Uploads{&counted}, [](std::string addr) -> Task<void> {
    // Both on one connection, each past the 1 MiB stream window: /hold's
    // handler reads only after /count's has answered, which it can only if
    // /hold's unread bytes leave the connection's window open.
    const char* script = R"JS(
const http2 = require('http2');
const client = http2.connect('http://' + process.argv[1]);
client.on('error', (e) => { console.error('node: ' + e.message); process.exit(1); });
const big = Buffer.alloc(3 << 20, 1);
const order = [];
for (const path of ['/hold', '/count']) {
  const req = client.request({':method': 'POST', ':path': path});
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (d) => body += d);
  req.on('end', () => {
    order.push(path + '=' + body);
    if (order.length === 2) { console.log(order.join(' ')); client.close(); }
  });
  req.end(big);
}
)JS";
    const std::vector<std::string> argv{"node", "-e", script, addr};
    const Ran r = co_await run_client(argv);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out, "/count=3145728 3145728 /hold=3145728 3145728\n") << r.err;
  });
}

// ---- shoal's client ---------------------------------------------------------

Address address_of(const std::string& addr) { return Address::parse(addr); }

SHOAL_TEST(Http2Clients, TheClientGetsAndPostsOnOneConnection) {
  http::ServerStats stats;
  http::ServerOptions o;
  o.stats = &stats;
  co_await with_h2_server(o, Echo{}, [](std::string addr) -> Task<void> {
    co_await http2::connect(address_of(addr), [&](http2::Client& c) -> Task<void> {
      const http2::ClientResponse got = co_await c.get("/hello?x=1");
      EXPECT_EQ(got.status, 200);
      EXPECT_EQ(got.body, "GET /hello?x=1 ");
      EXPECT_EQ(got.header("X-Host"), addr);  // :authority, the address connected to
      EXPECT_FALSE(got.header("date").empty());
      const std::string big(300'000, 'p');  // past the first stream window's worth of frames
      const std::vector<http2::Field> fields{{"content-type", "text/plain"}};  // g++ 12: no braced list in co_await
      const http2::ClientResponse posted = co_await c.request("POST", "/up", big, fields);
      EXPECT_EQ(posted.status, 200);
      EXPECT_TRUE(posted.body == "POST /up " + big) << posted.body.substr(0, 40);
      EXPECT_EQ((co_await c.get("/status/404")).status, 404);
    });
  });
  EXPECT_EQ(stats.snapshot().http2_connections_opened, 1u);
  EXPECT_EQ(stats.snapshot().streams_opened, 3u);
}

SHOAL_TEST(Http2Clients, TheClientRunsAHundredRequestsAtOnceWithinTheServersStreamLimit) {
  std::atomic<int> now{0}, most{0};
  shoal::Event two;
  http::ServerOptions o;
  o.max_concurrent_streams = 8;
  co_await with_h2_server(o, Concurrency{&now, &most, &two}, [](std::string addr) -> Task<void> {
    co_await http2::connect(address_of(addr), [&](http2::Client& c) -> Task<void> {
      std::atomic<int> ok{0};
      co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
        for (int i = 0; i < 100; ++i) {
          s.spawn([&c, &ok, i]() -> Task<void> {
            const http2::ClientResponse r = co_await c.get("/" + std::to_string(i));
            if (r.status == 200 && r.body == "ok") ok.fetch_add(1);
          });
        }
        co_return;
      });
      EXPECT_EQ(ok.load(), 100);
    });
  });
  EXPECT_GE(most.load(), 2);  // they did run at once
  EXPECT_LE(most.load(), 8);  // the client kept to the advertised limit: none was refused
}

/// /hang as Hang; the rest answer with a trailer.
struct HangOrTrailer {
  shoal::test::Hang hang;
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() == "/hang") {
      co_await hang(req, res);
      co_return;
    }
    res.body = "payload";
    res.set_trailer("grpc-status", "0");
  }
};

SHOAL_TEST(Http2Clients, ACancelledClientRequestResetsItsStreamAndTheServersHandlerIsCancelled) {
  shoal::Event started, cancelled;
  co_await with_h2_server({}, HangOrTrailer{{&started, &cancelled}}, [&](std::string addr) -> Task<void> {
    co_await http2::connect(address_of(addr), [&](http2::Client& c) -> Task<void> {
      shoal::CancelScope cut;
      co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
        s.spawn([&]() -> Task<void> {
          co_await started.wait();
          cut.cancel();
        });
        const bool done = co_await cut.run([&]() -> Task<void> { (void)co_await c.get("/hang"); }());
        EXPECT_FALSE(done);
      });
      const bool seen = co_await shoal::move_on_after(30s, cancelled.wait());
      EXPECT_TRUE(seen) << "the server's handler was not cancelled by the client's reset";
      const http2::ClientResponse r = co_await c.get("/");  // the connection serves on
      EXPECT_EQ(r.body, "payload");
      EXPECT_EQ(r.trailers.size(), 1u);
      if (r.trailers.size() == 1) {
        EXPECT_EQ(r.trailers[0].name, "grpc-status");
        EXPECT_EQ(r.trailers[0].value, "0");
      }
    });
  });
}

SHOAL_TEST(Http2Clients, AResponsePastTheClientsMaxBodyFailsItsRequestWithAMessage) {
  co_await with_h2_server({}, Echo{}, [](std::string addr) -> Task<void> {
    http2::ClientOptions options;
    options.max_body = 1000;
    co_await http2::connect(
        address_of(addr),
        [&](http2::Client& c) -> Task<void> {
          try {
            (void)co_await c.request("POST", "/big", std::string(5000, 'x'));
            ADD_FAILURE() << "a 5 kB body passed a 1000-byte max_body";
          } catch (const http2::RequestError& e) {
            EXPECT_NE(std::string(e.what()).find("max_body (1000 bytes)"), std::string::npos) << e.what();
            EXPECT_FALSE(e.retryable());
          }
          EXPECT_EQ((co_await c.get("/small")).body, "GET /small ");  // the connection serves on
        },
        options);
  });
}

SHOAL_TEST(Http2Clients, RequestsFailWithRequestErrorOnceTheServerHasGone) {
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {  // a "server" that accepts, reads a little and goes
      shoal::net::Stream conn = co_await listener.accept();
      std::array<std::byte, 64> buf;
      (void)co_await conn.read_some(buf);
    });
    co_await http2::connect(addr, [&](http2::Client& c) -> Task<void> {
      for (int i = 0; i < 2; ++i) {  // the one in flight, then one after the end
        try {
          (void)co_await c.get("/");
          ADD_FAILURE() << "a request to a server that went away succeeded";
        } catch (const http2::RequestError& e) {
          EXPECT_NE(std::string(e.what()).find("shoal::http2::Client: "), std::string::npos) << e.what();
        }
      }
    });
  });
}

SHOAL_TEST(Http2Clients, TheClientGetsAFileFromNghttpd) {
  if (!have("nghttpd")) co_return;
  char dir_template[] = "/tmp/shoal-nghttpd-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  std::string content;
  for (int i = 0; content.size() < 200'000; ++i) content += std::to_string(i) + "\n";
  {
    std::FILE* f = std::fopen((dir + "/file.txt").c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (f != nullptr) {
      std::fwrite(content.data(), 1, content.size(), f);
      std::fclose(f);
    }
  }
  // A free port: bound, then released for nghttpd (which takes no socket).
  std::string port;
  {
    auto probe = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
    const std::string a = probe.local_address().to_string();
    port = a.substr(a.rfind(':') + 1);
  }
  auto server = shoal::process::spawn({"nghttpd", "--no-tls", "-a", "127.0.0.1", "-d", dir, port});
  // nghttpd says nothing when it listens: connect until it does (bounded).
  std::optional<shoal::net::Stream> conn;
  for (int attempt = 0; attempt < 200 && !conn; ++attempt) {
    bool refused = false;
    try {
      conn = co_await shoal::net::connect(Address::parse("127.0.0.1:" + port));
    } catch (const std::system_error&) {
      refused = true;
    }
    if (refused) co_await shoal::sleep_for(10ms);
  }
  EXPECT_TRUE(conn.has_value()) << "nghttpd did not listen on " << port;
  if (conn) {
    http2::ClientOptions options;
    options.authority = "127.0.0.1:" + port;
    co_await http2::connect(
        *conn,
        [&](http2::Client& c) -> Task<void> {
          const http2::ClientResponse r = co_await c.get("/file.txt");
          EXPECT_EQ(r.status, 200);
          EXPECT_TRUE(r.body == content) << r.body.size() << " bytes";
          EXPECT_EQ((co_await c.get("/missing")).status, 404);
        },
        options);
  }
  server.kill(SIGTERM);
  (void)co_await server.wait();
  std::filesystem::remove_all(dir);
}

}  // namespace
