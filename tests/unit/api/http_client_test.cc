#include "api/http_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "api/http_server.h"
#include "http_test_support.h"

namespace paddock::api {
namespace {

using namespace std::chrono_literals;

TEST(HttpClientTest, ParseBaseUrl) {
  auto u = ParseBaseUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->path_prefix, "");

  u = ParseBaseUrl("HTTP://paddock.local/api/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "paddock.local");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->path_prefix, "/api");

  u = ParseBaseUrl("http://[::1]:9000/x");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->path_prefix, "/x");

  EXPECT_EQ(ParseBaseUrl("https://h:1").status().code(), StatusCode::kUnimplemented);
  for (const char* bad :
       {"127.0.0.1:80", "ftp://h", "http://", "http://:80", "http://h:0", "http://h:65536",
        "http://h:8x", "http://user@h", "http://h/?q", "http://[::1", "http://h:"}) {
    EXPECT_EQ(ParseBaseUrl(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

class HttpClientServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.idle_timeout = 200ms;
    server_ = std::make_unique<HttpServer>(options);
    ASSERT_TRUE(server_
                    ->Route("GET", "/ping",
                            [](const Request& r, ResponseWriter& w) {
                              w.Send(Response{200, "text/plain", r.remote_address, {}});
                            })
                    .ok());
    ASSERT_TRUE(server_
                    ->Route("GET", "/sleep",
                            [](const Request&, ResponseWriter& w) {
                              std::this_thread::sleep_for(600ms);
                              w.Send(Response{200, "text/plain", "late", {}});
                            })
                    .ok());
    ASSERT_TRUE(server_
                    ->Route("GET", "/big",
                            [](const Request&, ResponseWriter& w) {
                              w.Send(Response{200, "text/plain", std::string(100000, 'b'), {}});
                            })
                    .ok());
    ASSERT_TRUE(server_
                    ->Route("POST", "/echo-headers",
                            [](const Request& r, ResponseWriter& w) {
                              w.Send(Response{200,
                                              "text/plain",
                                              r.headers.Get("content-type") + "|" +
                                                  r.headers.Get("x-custom") + "|" + r.body,
                                              {}});
                            })
                    .ok());
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(2s); }

  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpClientServerTest, ReconnectsAfterServerClosedIdleConnection) {
  HttpClient client("127.0.0.1", server_->port());
  auto first = client.Request("GET", "/ping");
  ASSERT_TRUE(first.ok());
  std::this_thread::sleep_for(500ms);  // the server's idle timeout closes the connection
  auto second = client.Request("GET", "/ping");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->status, 200);
  EXPECT_NE(first->body, second->body) << "expected a new connection";
}

TEST_F(HttpClientServerTest, SendsHeadersAndDefaultsJsonContentType) {
  HttpClient client("127.0.0.1", server_->port());
  auto r = client.Request("POST", "/echo-headers", "{}", {{"X-Custom", "v"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "application/json|v|{}");
  r = client.Request("POST", "/echo-headers", "x", {{"Content-Type", "text/plain"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "text/plain||x");
  // Header injection and bad targets are refused before anything is sent.
  EXPECT_EQ(client.Request("GET", "/ping", "", {{"X-A", "1\r\nX-B: 2"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Request("GET", "/a b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Request("GET", "relative").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Request("G T", "/ping").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpClientServerTest, TimeoutsAndLimits) {
  ClientOptions options;
  options.io_timeout = 150ms;
  HttpClient impatient("127.0.0.1", server_->port(), options);
  auto r = impatient.Request("GET", "/sleep");
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  // The client recovers on the next request.
  r = impatient.Request("GET", "/ping");
  EXPECT_TRUE(r.ok()) << r.status().ToString();

  ClientOptions small;
  small.max_response_bytes = 1000;
  HttpClient limited("127.0.0.1", server_->port(), small);
  EXPECT_EQ(limited.Request("GET", "/big").status().code(), StatusCode::kResourceExhausted);
  auto ok = limited.Request("GET", "/ping");
  EXPECT_TRUE(ok.ok());
}

TEST(HttpClientTest, ConnectionRefusedIsUnavailable) {
  // Bind a port and close it so nothing listens there.
  uint16_t port;
  {
    HttpServer s;
    ASSERT_TRUE(s.Start().ok());
    port = s.port();
    s.Stop(0ms);
  }
  HttpClient client("127.0.0.1", port);
  auto r = client.Request("GET", "/");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

}  // namespace
}  // namespace paddock::api
