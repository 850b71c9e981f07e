// shoal::http2 driven by real HTTP/2 clients nobody here wrote: curl (with
// prior knowledge of h2c), nghttp and h2load (Debian's nghttp2-client) and
// Node's http2 module, each as a child process against an in-process server.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <string>
#include <vector>

#include "shoal/http.hpp"
#include "http2/h2_support.hpp"
#include "shoal/http2/server.hpp"
#include "shoal/sync/event.hpp"
#if SHOAL_TEST_TLS
#include "shoal/http2/https.hpp"
#endif
#include "support/client_process.hpp"
#include "support/test_certs.hpp"
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
SHOAL_TEST(Http2Clients, CurlOverTlsGetsHttp2ByAlpnAndHttp11WhenItAsksForIt) {
  if (!have("curl")) co_return;
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const std::string port = std::to_string(listener.local_address().port());
  shoal::tls::ServerOptions tls_options;
  tls_options.certificate_chain_file = shoal::test::certs().cert;
  tls_options.private_key_file = shoal::test::certs().key;
  tls_options.alpn = {"h2", "http/1.1"};
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  http::ServerOptions options;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(http2::serve(listener, opts, options, shoal::tls::Context::server(tls_options), Echo{}));
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
    std::array<std::byte, 65536> buf;
    std::size_t total = 0;
    std::uint32_t sum = 0;
    while (const std::size_t n = co_await req.read_some(buf)) {
      total += n;
      for (std::size_t i = 0; i < n; ++i) sum += std::to_integer<std::uint32_t>(buf[i]);
    }
    res.body = std::to_string(total) + " " + std::to_string(sum);
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
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < body.size(); ++i) {
      if (i % 4096 == 0) body[i] = static_cast<char>('a' + (i / 4096) % 26);
      sum += static_cast<unsigned char>(body[i]);
    }
    const std::vector<std::string> argv{"curl", "-sS", "--http2-prior-knowledge", "--data-binary", "@-",
                                        url(addr, "/count")};
    const Ran r = co_await run_client(argv, body);
    EXPECT_TRUE(r.status.success()) << r.status.to_string() << ": " << r.err;
    EXPECT_EQ(r.out, std::to_string(body.size()) + " " + std::to_string(sum));
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

}  // namespace
