#include "api/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "api/http_client.h"
#include "api/metrics.h"
#include "http_test_support.h"

namespace paddock::api {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::BodyOf;
using testing::HeaderOf;
using testing::RawConn;
using testing::StatusOf;
using Clock = std::chrono::steady_clock;

Handler Text(std::string body) {
  return [body](const Request&, ResponseWriter& w) {
    w.Send(Response{200, "text/plain", body, {}});
  };
}

long long MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

bool IsGeneratedId(const std::string& id) {
  return std::regex_match(id, std::regex("[0-9a-f]{32}"));
}

class HttpServerTest : public ::testing::Test {
 protected:
  // Creates the server with the common routes; tests add their own before Start().
  void Create(HttpServerOptions options = {}) {
    server_ = std::make_unique<HttpServer>(options);
    ASSERT_TRUE(server_->Route("GET", "/ping", Text("pong")).ok());
    ASSERT_TRUE(server_
                    ->Route("GET", "/echo-id",
                            [](const Request& r, ResponseWriter& w) {
                              w.Send(Response{200, "text/plain", r.request_id, {}});
                            })
                    .ok());
    ASSERT_TRUE(server_
                    ->Route("GET", "/whoami",
                            [](const Request& r, ResponseWriter& w) {
                              w.Send(Response{200, "text/plain", r.remote_address, {}});
                            })
                    .ok());
    auto body_size = [](const Request& r, ResponseWriter& w) {
      w.Send(JsonResponse(200, {{"size", r.body.size()}}));
    };
    ASSERT_TRUE(server_->Route("POST", "/small", body_size).ok());
    ASSERT_TRUE(server_->Route("POST", "/upload", body_size, {.max_body_bytes = 4 << 20}).ok());
  }
  void Start() {
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    port_ = server_->port();
    ASSERT_NE(port_, 0);
  }
  void CreateAndStart(HttpServerOptions options = {}) {
    Create(options);
    Start();
  }
  void TearDown() override {
    if (server_) server_->Stop(2s);
  }
  HttpClient Client(ClientOptions options = {}) { return HttpClient("127.0.0.1", port_, options); }

  MetricsRegistry metrics_;  // outlives server_, which may record into it until stopped
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

json ErrorOf(const ClientResponse& r) {
  json body = json::parse(r.body);
  return body.at("error");
}

TEST_F(HttpServerTest, RoutesParamsRestParamsAndQueryArePercentDecoded) {
  Create();
  auto echo = [](const Request& r, ResponseWriter& w) {
    json q = json::object();
    for (const auto& [k, v] : r.query) q[k] = v;
    w.Send(JsonResponse(200, {{"id", r.Param("id")},
                              {"path", r.Param("path")},
                              {"query", q},
                              {"raw_path", r.path},
                              {"method", r.method}}));
  };
  ASSERT_TRUE(server_->Route("GET", "/v1/sandboxes/{id}/files/{path*}", echo).ok());
  ASSERT_TRUE(server_->Route("GET", "/v1/sandboxes/{id}", echo).ok());
  ASSERT_TRUE(server_->Route("GET", "/v1/sandboxes/stats", Text("stats")).ok());
  Start();
  HttpClient client = Client();

  auto r =
      client.Request("GET", "/v1/sandboxes/sb%2D1/files/dir%20a/b%C3%A9.txt?x=1&y=a%20b+c&y=2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->status, 200) << r->body;
  json body = json::parse(r->body);
  EXPECT_EQ(body["id"], "sb-1");
  EXPECT_EQ(body["path"], "dir a/b\xC3\xA9.txt");
  EXPECT_EQ(body["query"]["x"], "1");
  EXPECT_EQ(body["query"]["y"], "a b c");  // first occurrence wins
  EXPECT_EQ(body["raw_path"], "/v1/sandboxes/sb%2D1/files/dir%20a/b%C3%A9.txt");

  // The rest parameter takes zero or more segments but needs its '/'.
  r = client.Request("GET", "/v1/sandboxes/x/files/");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["path"], "");
  r = client.Request("GET", "/v1/sandboxes/x/files");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);

  // A literal segment beats a parameter.
  r = client.Request("GET", "/v1/sandboxes/stats");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "stats");
  r = client.Request("GET", "/v1/sandboxes/other");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(json::parse(r->body)["id"], "other");
}

TEST_F(HttpServerTest, TraversalAndMalformedEscapesInPathsAre400) {
  Create();
  std::atomic<int> calls{0};
  ASSERT_TRUE(server_
                  ->Route("GET", "/files/{path*}",
                          [&](const Request&, ResponseWriter& w) {
                            ++calls;
                            w.Send(Response{});
                          })
                  .ok());
  Start();
  HttpClient client = Client();
  for (const char* target : {"/files/a/../b", "/files/a/%2e%2e/b", "/files/a%2F..%2Fb",
                             "/files/a%00b", "/files/%zz", "/files/a%2", "/files/./x"}) {
    auto r = client.Request("GET", target);
    ASSERT_TRUE(r.ok()) << target;
    EXPECT_EQ(r->status, 400) << target;
    EXPECT_EQ(ErrorOf(*r)["code"], "bad_request") << target;
  }
  auto r = client.Request("GET", "/files/a?bad=%zz");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(calls.load(), 0);
}

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  Create();
  ASSERT_TRUE(server_->Route("DELETE", "/v1/things/{id}", Text("deleted")).ok());
  ASSERT_TRUE(server_->Route("GET", "/v1/things/{id}", Text("got")).ok());
  Start();
  HttpClient client = Client();

  auto r = client.Request("GET", "/nope");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->headers.Get("content-type"), "application/json");
  json err = ErrorOf(*r);
  EXPECT_EQ(err["code"], "not_found");
  EXPECT_TRUE(err["message"].is_string());
  EXPECT_TRUE(err["details"].is_object());

  r = client.Request("POST", "/v1/things/7", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->headers.Get("Allow"), "DELETE, GET");
  err = ErrorOf(*r);
  EXPECT_EQ(err["code"], "method_not_allowed");
  EXPECT_EQ(err["details"]["allowed_methods"], json({"DELETE", "GET"}));

  // The connection survives error responses.
  r = client.Request("DELETE", "/v1/things/7");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "deleted");
}

TEST_F(HttpServerTest, BodyOverRouteLimitIs413AndRaisedLimitAccepts) {
  CreateAndStart();
  HttpClient client = Client();
  std::string big((1 << 20) + 1, 'x');
  auto r = client.Request("POST", "/small", big);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(ErrorOf(*r)["code"], "payload_too_large");
  EXPECT_EQ(ErrorOf(*r)["details"]["max_body_bytes"], 1 << 20);

  r = client.Request("POST", "/small", std::string(1 << 20, 'y'));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["size"], 1 << 20);

  std::string upload(2 << 20, 'z');
  r = client.Request("POST", "/upload", upload);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["size"], 2 << 20);
  r = client.Request("POST", "/upload", std::string((4 << 20) + 1, 'z'));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 413);
}

TEST_F(HttpServerTest, ChunkedBodyOverLimitIs413) {
  CreateAndStart();
  RawConn conn(port_);
  ASSERT_TRUE(conn.connected());
  std::string chunk(600 * 1024, 'a');
  char size_line[32];
  snprintf(size_line, sizeof(size_line), "%zx\r\n", chunk.size());
  std::string req = "POST /small HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  req += size_line + chunk + "\r\n" + size_line + chunk + "\r\n0\r\n\r\n";
  conn.Send(req);
  std::string resp = conn.ReadResponse();
  EXPECT_EQ(StatusOf(resp), 413) << resp.substr(0, 200);
  EXPECT_EQ(json::parse(BodyOf(resp))["error"]["code"], "payload_too_large");
}

TEST_F(HttpServerTest, ExpectContinueGetsInterimResponse) {
  CreateAndStart();
  RawConn conn(port_);
  conn.Send("POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  bool closed = false;
  std::string interim = conn.ReadUntilClose(300ms, &closed);
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  conn.Send("hello");
  std::string resp = conn.ReadResponse();
  EXPECT_EQ(StatusOf(resp), 200);
  EXPECT_EQ(json::parse(BodyOf(resp))["size"], 5);
}

TEST_F(HttpServerTest, MalformedRequestIs400AndServerSurvives) {
  CreateAndStart();
  for (const char* garbage :
       {"GARBAGE\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET /ping HTTP/1.1\r\nBad Header\r\n\r\n",
        "GET /ping HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n"}) {
    RawConn conn(port_);
    ASSERT_TRUE(conn.connected());
    conn.Send(garbage);
    bool closed = false;
    std::string resp = conn.ReadUntilClose(3s, &closed);
    EXPECT_EQ(StatusOf(resp), 400) << garbage << " -> " << resp;
    EXPECT_EQ(json::parse(BodyOf(resp))["error"]["code"], "bad_request");
    EXPECT_TRUE(closed) << "connection must be closed after a parse error";
  }
  // HTTP/1.1 without Host, and an absolute-form target.
  {
    RawConn conn(port_);
    conn.Send("GET /ping HTTP/1.1\r\n\r\n");
    EXPECT_EQ(StatusOf(conn.ReadResponse()), 400);
  }
  {
    RawConn conn(port_);
    conn.Send("GET http://evil/ping HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(StatusOf(conn.ReadResponse()), 400);
  }
  auto r = Client().Request("GET", "/ping");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "pong");
}

TEST_F(HttpServerTest, OversizedHeadersAre431) {
  CreateAndStart();
  RawConn conn(port_);
  std::string req =
      "GET /ping HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n";
  conn.Send(req);
  bool closed = false;
  std::string resp = conn.ReadUntilClose(3s, &closed);
  EXPECT_EQ(StatusOf(resp), 431) << resp.substr(0, 100);
  EXPECT_EQ(json::parse(BodyOf(resp))["error"]["code"], "header_too_large");
  EXPECT_TRUE(closed);

  // Just under the limit is fine.
  auto r = Client().Request("GET", "/ping", "", {{"X-Big", std::string(15000, 'b')}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, SlowClientIsDisconnectedAfterReadTimeout) {
  HttpServerOptions options;
  options.read_timeout = 300ms;
  CreateAndStart(options);

  // Half the headers, then nothing.
  RawConn half(port_);
  ASSERT_TRUE(half.connected());
  auto t0 = Clock::now();
  half.Send("GET /ping HTTP/1.1\r\nHost: t\r\n");
  bool closed = false;
  std::string got = half.ReadUntilClose(5s, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got, "");
  EXPECT_GE(MsSince(t0), 250);
  EXPECT_LT(MsSince(t0), 3000);

  // Slowloris: a byte every 50 ms keeps the socket busy but the deadline is absolute.
  RawConn drip(port_);
  t0 = Clock::now();
  std::string req =
      "GET /ping HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
  bool sent_all = true;
  for (char c : req) {
    if (!drip.Send(std::string_view(&c, 1))) {
      sent_all = false;
      break;
    }
    std::this_thread::sleep_for(50ms);
    if (MsSince(t0) > 2000) break;
  }
  got = drip.ReadUntilClose(3s, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(StatusOf(got), 0) << "a slow request must not be answered: " << got;
  EXPECT_FALSE(sent_all && got.find("pong") != std::string::npos);

  // The server still serves well-behaved clients.
  auto r = Client().Request("GET", "/ping");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  HttpServerOptions options;
  options.idle_timeout = 300ms;
  CreateAndStart(options);
  RawConn conn(port_);
  conn.Send("GET /ping HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(StatusOf(conn.ReadResponse()), 200);
  auto t0 = Clock::now();
  bool closed = false;
  conn.ReadUntilClose(5s, &closed);
  EXPECT_TRUE(closed);
  EXPECT_GE(MsSince(t0), 250);
  EXPECT_LT(MsSince(t0), 3000);
}

TEST_F(HttpServerTest, KeepAliveServes100RequestsOnOneConnection) {
  CreateAndStart();
  HttpClient client = Client();
  std::string first_peer;
  for (int i = 0; i < 100; ++i) {
    auto r = client.Request("GET", "/whoami");
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
    ASSERT_EQ(r->status, 200);
    if (i == 0) first_peer = r->body;
    // Same client port every time = same TCP connection.
    ASSERT_EQ(r->body, first_peer) << "request " << i << " used a new connection";
  }
  EXPECT_EQ(server_->active_connections(), 1u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  CreateAndStart();
  RawConn conn(port_);
  conn.Send(
      "GET /ping HTTP/1.1\r\nHost: t\r\n\r\n"
      "POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"
      "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
  std::string a = conn.ReadResponse();
  std::string b = conn.ReadResponse();
  std::string c = conn.ReadResponse();
  EXPECT_EQ(BodyOf(a), "pong");
  EXPECT_EQ(json::parse(BodyOf(b))["size"], 3);
  EXPECT_EQ(StatusOf(c), 404);
}

TEST_F(HttpServerTest, Http10ClientGetsResponseAndClose) {
  CreateAndStart();
  RawConn conn(port_);
  conn.Send("GET /ping HTTP/1.0\r\n\r\n");
  bool closed = false;
  std::string resp = conn.ReadUntilClose(3s, &closed);
  EXPECT_EQ(StatusOf(resp), 200);
  EXPECT_EQ(BodyOf(resp), "pong");
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, ConcurrentClients) {
  CreateAndStart();
  ASSERT_TRUE(server_
                  ->Route("POST", "/echo",
                          [](const Request& r, ResponseWriter& w) {
                            std::this_thread::sleep_for(1ms);
                            w.Send(Response{200, "text/plain", r.body, {}});
                          })
                  .ok());
  constexpr int kThreads = 20;
  constexpr int kRequests = 25;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client = Client();
      for (int i = 0; i < kRequests; ++i) {
        std::string body = "thread " + std::to_string(t) + " request " + std::to_string(i);
        auto r = client.Request("POST", "/echo", body, {{"Content-Type", "text/plain"}});
        if (r.ok() && r->status == 200 && r->body == body) ++good;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kThreads * kRequests);
}

TEST_F(HttpServerTest, StreamingDeliversChunksIncrementally) {
  Create();
  ASSERT_TRUE(server_
                  ->Route("GET", "/stream",
                          [](const Request&, ResponseWriter& w) {
                            ASSERT_TRUE(w.StartStream(200, "application/x-ndjson"));
                            for (int i = 0; i < 5; ++i) {
                              ASSERT_TRUE(w.WriteChunk("{\"n\":" + std::to_string(i) + "}\n"));
                              std::this_thread::sleep_for(150ms);
                            }
                            EXPECT_TRUE(w.EndStream());
                          })
                  .ok());
  Start();
  HttpClient client = Client();
  auto t0 = Clock::now();
  std::vector<std::pair<long long, std::string>> pieces;
  auto r = client.RequestStream("GET", "/stream", "", {}, [&](std::string_view data) {
    pieces.emplace_back(MsSince(t0), std::string(data));
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.Get("Transfer-Encoding"), "chunked");
  EXPECT_EQ(r->headers.Get("Content-Type"), "application/x-ndjson");
  EXPECT_TRUE(r->body.empty());
  std::string all;
  for (auto& [ms, data] : pieces) all += data;
  EXPECT_EQ(all, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n");
  ASSERT_GE(pieces.size(), 5u);
  // The first chunk arrived long before the handler finished (5 x 150 ms).
  EXPECT_LT(pieces.front().first, 300);
  EXPECT_GE(pieces.back().first - pieces.front().first, 450);
  // The connection is reusable after a properly terminated stream.
  auto again = client.Request("GET", "/ping");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->body, "pong");
}

TEST_F(HttpServerTest, HandlerExceptionOrSilenceIs500Json) {
  Create();
  ASSERT_TRUE(server_
                  ->Route("GET", "/throw",
                          [](const Request&, ResponseWriter&) {
                            throw std::runtime_error("secret host detail /var/lib/x");
                          })
                  .ok());
  ASSERT_TRUE(server_->Route("GET", "/silent", [](const Request&, ResponseWriter&) {}).ok());
  ASSERT_TRUE(
      server_->Route("GET", "/throw-int", [](const Request&, ResponseWriter&) { throw 42; }).ok());
  Start();
  HttpClient client = Client();
  for (const char* path : {"/throw", "/silent", "/throw-int"}) {
    auto r = client.Request("GET", path);
    ASSERT_TRUE(r.ok()) << path;
    EXPECT_EQ(r->status, 500) << path;
    json err = ErrorOf(*r);
    EXPECT_EQ(err["code"], "internal");
    EXPECT_EQ(r->body.find("/var/lib"), std::string::npos) << "exception text leaked";
  }
  auto r = client.Request("GET", "/ping");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, ClientDisconnectDuringStreamMakesWriteChunkFail) {
  Create();
  std::promise<std::pair<int, bool>> outcome;  // chunks written before failure, Cancelled()
  ASSERT_TRUE(server_
                  ->Route("GET", "/forever",
                          [&](const Request&, ResponseWriter& w) {
                            w.StartStream(200, "text/plain");
                            std::string data(1024, 'd');
                            for (int i = 0; i < 250; ++i) {  // at most ~5 s
                              if (!w.WriteChunk(data)) {
                                outcome.set_value({i, w.Cancelled()});
                                return;
                              }
                              std::this_thread::sleep_for(20ms);
                            }
                            outcome.set_value({-1, w.Cancelled()});
                          })
                  .ok());
  Start();
  HttpClient client = Client();
  int seen = 0;
  auto r = client.RequestStream("GET", "/forever", "", {}, [&](std::string_view) {
    return ++seen < 3;  // hang up after the third piece
  });
  ASSERT_TRUE(r.ok());
  auto future = outcome.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  auto [failed_at, cancelled] = future.get();
  EXPECT_GE(failed_at, 1) << "WriteChunk never returned false";
  EXPECT_TRUE(cancelled);
}

TEST_F(HttpServerTest, RequestIdIsEchoedOrReplacedWhenHostile) {
  CreateAndStart();
  HttpClient client = Client();
  auto r = client.Request("GET", "/echo-id", "", {{"X-Request-Id", "abc-123._XYZ"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->headers.Get("X-Request-Id"), "abc-123._XYZ");
  EXPECT_EQ(r->body, "abc-123._XYZ");

  r = client.Request("GET", "/echo-id");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(IsGeneratedId(r->body)) << r->body;
  EXPECT_EQ(r->headers.Get("X-Request-Id"), r->body);

  for (std::string hostile : {std::string(200, 'a'), std::string("a b"), std::string("<script>"),
                              std::string("x;rm -rf"), std::string(65, 'b'), std::string("")}) {
    r = client.Request("GET", "/echo-id", "", {{"X-Request-Id", hostile}});
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(IsGeneratedId(r->body)) << hostile << " -> " << r->body;
    EXPECT_EQ(r->headers.Get("X-Request-Id"), r->body);
  }

  // CR/LF can only come over a raw socket: a bare CR must never reach a response header.
  RawConn conn(port_);
  conn.Send("GET /echo-id HTTP/1.1\r\nHost: t\r\nX-Request-Id: abc\rSet-Cookie: x=1\r\n\r\n");
  bool closed = false;
  std::string resp = conn.ReadUntilClose(2s, &closed);
  ASSERT_NE(StatusOf(resp), 0);
  EXPECT_EQ(HeaderOf(resp, "Set-Cookie"), "");
  EXPECT_TRUE(IsGeneratedId(HeaderOf(resp, "X-Request-Id"))) << resp;
  // Errors carry the id too.
  r = client.Request("GET", "/nope", "", {{"X-Request-Id", "err-1"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->headers.Get("X-Request-Id"), "err-1");
}

TEST_F(HttpServerTest, HandlerHeadersCannotBreakFraming) {
  Create();
  ASSERT_TRUE(server_
                  ->Route("GET", "/headers",
                          [](const Request&, ResponseWriter& w) {
                            Response r{200, "text/plain", "ok", {}};
                            r.headers.Add("X-Good", "yes");
                            r.headers.Add("X-Evil", "a\r\nSet-Cookie: pwned=1");
                            r.headers.Add("Content-Length", "9999");
                            r.headers.Add("X-Request-Id", "spoofed");
                            w.Send(std::move(r));
                          })
                  .ok());
  Start();
  RawConn conn(port_);
  conn.Send("GET /headers HTTP/1.1\r\nHost: t\r\n\r\n");
  std::string resp = conn.ReadResponse();
  EXPECT_EQ(StatusOf(resp), 200);
  EXPECT_EQ(HeaderOf(resp, "X-Good"), "yes");
  EXPECT_EQ(HeaderOf(resp, "Set-Cookie"), "");
  EXPECT_EQ(HeaderOf(resp, "Content-Length"), "2");
  EXPECT_NE(HeaderOf(resp, "X-Request-Id"), "spoofed");
  EXPECT_EQ(BodyOf(resp), "ok");
}

TEST_F(HttpServerTest, GracefulStopLetsSlowHandlerFinishAndRefusesNewConnections) {
  Create();
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  ASSERT_TRUE(server_
                  ->Route("GET", "/slow",
                          [&](const Request&, ResponseWriter& w) {
                            started = true;
                            std::this_thread::sleep_for(800ms);
                            finished = true;
                            w.Send(Response{200, "text/plain", "done", {}});
                          })
                  .ok());
  Start();
  auto response = std::async(std::launch::async, [&] { return Client().Request("GET", "/slow"); });
  while (!started) std::this_thread::sleep_for(5ms);

  auto t0 = Clock::now();
  auto stopper = std::async(std::launch::async, [&] { server_->Stop(10s); });
  bool refused = false;
  while (!refused && MsSince(t0) < 2000) {
    RawConn probe(port_);
    refused = !probe.connected() && probe.connect_errno() == ECONNREFUSED;
    if (!refused) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(refused) << "new connections must be refused while stopping";
  EXPECT_FALSE(finished.load()) << "refusal should happen while the handler still runs";

  auto r = response.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "done");
  EXPECT_EQ(r->headers.Get("Connection"), "close");
  stopper.get();
  EXPECT_GE(MsSince(t0), 600);
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(server_->active_connections(), 0u);
}

TEST_F(HttpServerTest, StopClosesIdleConnectionsImmediately) {
  CreateAndStart();
  RawConn idle(port_);
  idle.Send("GET /ping HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_EQ(StatusOf(idle.ReadResponse()), 200);
  auto t0 = Clock::now();
  server_->Stop(10s);
  EXPECT_LT(MsSince(t0), 1000);
  bool closed = false;
  idle.ReadUntilClose(2s, &closed);
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, StopForceClosesStreamsAfterDeadline) {
  Create();
  std::atomic<bool> write_failed{false};
  std::atomic<bool> started{false};
  ASSERT_TRUE(server_
                  ->Route("GET", "/tail",
                          [&](const Request&, ResponseWriter& w) {
                            w.StartStream(200, "text/plain");
                            started = true;
                            for (int i = 0; i < 1000; ++i) {
                              if (!w.WriteChunk("line\n")) {
                                write_failed = true;
                                return;
                              }
                              std::this_thread::sleep_for(10ms);
                            }
                          })
                  .ok());
  Start();
  auto reader = std::async(std::launch::async, [&] {
    return Client().RequestStream("GET", "/tail", "", {}, [](std::string_view) { return true; });
  });
  while (!started) std::this_thread::sleep_for(5ms);
  auto t0 = Clock::now();
  server_->Stop(200ms);
  EXPECT_GE(MsSince(t0), 150);
  EXPECT_LT(MsSince(t0), 2000);
  EXPECT_TRUE(write_failed.load());
  auto r = reader.get();
  EXPECT_FALSE(r.ok()) << "a force-closed stream must not look complete";
}

TEST_F(HttpServerTest, ConnectionCapAnswers503) {
  HttpServerOptions options;
  options.max_connections = 2;
  CreateAndStart(options);
  auto a = std::make_unique<RawConn>(port_);
  RawConn b(port_);
  for (RawConn* c : {a.get(), &b}) {
    c->Send("GET /ping HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_EQ(StatusOf(c->ReadResponse()), 200);
  }
  EXPECT_EQ(server_->active_connections(), 2u);

  auto r = Client().Request("GET", "/ping");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(ErrorOf(*r)["code"], "unavailable");

  a.reset();  // frees a slot
  bool served = false;
  auto t0 = Clock::now();
  while (!served && MsSince(t0) < 3000) {
    auto again = Client().Request("GET", "/ping");
    served = again.ok() && again->status == 200;
    if (!served) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(served);
}

TEST_F(HttpServerTest, RecordsMetrics) {
  HttpServerOptions options;
  options.metrics = &metrics_;
  Create(options);
  ASSERT_TRUE(server_->Route("GET", "/items/{id}", Text("item")).ok());
  Start();
  HttpClient client = Client();
  ASSERT_TRUE(client.Request("GET", "/items/1").ok());
  ASSERT_TRUE(client.Request("GET", "/items/2").ok());
  ASSERT_TRUE(client.Request("GET", "/missing").ok());
  ASSERT_TRUE(client.Request("BREW", "/items/3").ok());
  // A request is recorded just after its response is written: wait for the last one.
  const std::string last =
      "paddock_http_requests_total{method=\"other\",route=\"unmatched\",status=\"405\"} 1\n";
  std::string text;
  auto t0 = Clock::now();
  do {
    text = metrics_.Render();
  } while (text.find(last) == std::string::npos && MsSince(t0) < 2000);
  EXPECT_NE(text.find(last), std::string::npos) << text;
  // Unknown methods do not mint new label values.
  EXPECT_EQ(text.find("BREW"), std::string::npos);
  EXPECT_NE(
      text.find(
          "paddock_http_requests_total{method=\"GET\",route=\"/items/{id}\",status=\"200\"} 2\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("paddock_http_requests_total{method=\"GET\",route=\"unmatched\",status="
                      "\"404\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("paddock_http_request_duration_seconds_count{method=\"GET\",route=\"/items/"
                      "{id}\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("paddock_http_connections_active 1\n"), std::string::npos) << text;
}

TEST_F(HttpServerTest, StartErrorsAndRouteValidation) {
  CreateAndStart();
  // Same port twice.
  HttpServerOptions clash;
  clash.port = port_;
  HttpServer second(clash);
  EXPECT_FALSE(second.Start().ok());
  EXPECT_EQ(server_->Start().code(), StatusCode::kFailedPrecondition);

  HttpServer s;
  EXPECT_EQ(s.Route("GET", "no-slash", Text("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Route("GET", "/a/{rest*}/b", Text("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Route("GET", "/a/{x}/{x}", Text("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Route("GET", "/a/{bad-name}", Text("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Route("GE T", "/a", Text("")).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.Route("GET", "/a/{x}", Text("")).ok());
  EXPECT_EQ(s.Route("GET", "/a/{x}", Text("")).code(), StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace paddock::api
