#include "api/http_message.h"

#include <gtest/gtest.h>

#include "api/router.h"

namespace paddock::api {
namespace {

TEST(HttpMessageTest, HeadersAreCaseInsensitive) {
  Headers h{{"Content-Type", "a"}, {"X-Multi", "1"}};
  h.Add("x-multi", "2");
  EXPECT_EQ(h.Get("content-type"), "a");
  EXPECT_EQ(h.Get("CONTENT-TYPE"), "a");
  EXPECT_EQ(h.GetAll("X-MULTI"), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(h.Get("missing", "fallback"), "fallback");
  h.Set("X-Multi", "3");
  EXPECT_EQ(h.GetAll("x-multi"), (std::vector<std::string>{"3"}));
  EXPECT_FALSE(h.Find("nope").has_value());
  EXPECT_TRUE(IsValidHeaderField("X-A", "value with spaces"));
  EXPECT_FALSE(IsValidHeaderField("X-A", "a\r\nb"));
  EXPECT_FALSE(IsValidHeaderField("X A", "v"));
  EXPECT_FALSE(IsValidHeaderField("", "v"));
}

TEST(HttpMessageTest, PercentDecodingAndQueries) {
  EXPECT_EQ(*PercentDecode("a%20b%2Fc"), "a b/c");
  EXPECT_EQ(*PercentDecode("a+b"), "a+b");
  EXPECT_EQ(*PercentDecode("a+b", true), "a b");
  EXPECT_FALSE(PercentDecode("%").ok());
  EXPECT_FALSE(PercentDecode("%4").ok());
  EXPECT_FALSE(PercentDecode("%g0").ok());
  EXPECT_FALSE(PercentDecode("a%00b").ok());
  EXPECT_EQ(PercentEncode("a b/é"), "a%20b%2F%C3%A9");
  EXPECT_EQ(PercentEncode("a b/c", true), "a%20b/c");
  EXPECT_EQ(*PercentDecode(PercentEncode("x?&=%\x01")), "x?&=%\x01");

  auto q = ParseQuery("a=1&b=x%20y&flag&a=2&&c=");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->at("a"), "1");
  EXPECT_EQ(q->at("b"), "x y");
  EXPECT_EQ(q->at("flag"), "");
  EXPECT_EQ(q->at("c"), "");
  EXPECT_EQ(q->size(), 4u);
  EXPECT_FALSE(ParseQuery("a=%zz").ok());
}

TEST(HttpMessageTest, RequestIds) {
  EXPECT_TRUE(IsValidRequestId("abc-DEF_1.2"));
  EXPECT_TRUE(IsValidRequestId(std::string(64, 'a')));
  EXPECT_FALSE(IsValidRequestId(std::string(65, 'a')));
  EXPECT_FALSE(IsValidRequestId(""));
  EXPECT_FALSE(IsValidRequestId("a b"));
  EXPECT_FALSE(IsValidRequestId("a\r\nb"));
  EXPECT_FALSE(IsValidRequestId("a/b"));
}

TEST(HttpMessageTest, StatusMapping) {
  EXPECT_EQ(StatusToHttp(InvalidArgument("x")), 400);
  EXPECT_EQ(StatusToHttp(NotFound("x")), 404);
  EXPECT_EQ(StatusToHttp(Status(StatusCode::kAlreadyExists, "x")), 409);
  EXPECT_EQ(StatusToHttp(Status(StatusCode::kConflict, "x")), 409);
  EXPECT_EQ(StatusToHttp(FailedPrecondition("x")), 409);
  EXPECT_EQ(StatusToHttp(PermissionDenied("x")), 403);
  EXPECT_EQ(StatusToHttp(ResourceExhausted("x")), 429);
  EXPECT_EQ(StatusToHttp(ResourceExhausted("x"), 413), 413);
  EXPECT_EQ(StatusToHttp(Status(StatusCode::kDeadlineExceeded, "x")), 504);
  EXPECT_EQ(StatusToHttp(Status(StatusCode::kUnavailable, "x")), 503);
  EXPECT_EQ(StatusToHttp(Unimplemented("x")), 501);
  EXPECT_EQ(StatusToHttp(Internal("x")), 500);

  Response r = ErrorFromStatus(NotFound("sandbox sb-1 not found"), {{"id", "sb-1"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.content_type, "application/json");
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["error"]["code"], "not_found");
  EXPECT_EQ(body["error"]["message"], "sandbox sb-1 not found");
  EXPECT_EQ(body["error"]["details"]["id"], "sb-1");

  r = ErrorFromStatus(ResourceExhausted("too big"), {}, 413);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "resource_exhausted");
  EXPECT_TRUE(nlohmann::json::parse(r.body)["error"]["details"].is_object());

  r = ErrorFromStatus(Status::Ok());
  EXPECT_EQ(r.status, 500);

  // Invalid UTF-8 from caller input does not throw.
  r = ErrorResponse(400, "bad", std::string("caf\xC3", 4));
  EXPECT_EQ(r.status, 400);
  EXPECT_NO_THROW(nlohmann::json::parse(r.body));
}

TEST(HttpRouterTest, MatchesBySpecificity) {
  Router router;
  auto noop = [](const Request&, ResponseWriter&) {};
  ASSERT_TRUE(router.Add("GET", "/v1/{kind}/{id}", noop).ok());
  ASSERT_TRUE(router.Add("GET", "/v1/sandboxes/{id}", noop).ok());
  ASSERT_TRUE(router.Add("GET", "/v1/sandboxes/stats", noop).ok());
  ASSERT_TRUE(router.Add("GET", "/v1/sandboxes/{id}/files/{path*}", noop).ok());
  ASSERT_TRUE(router.Add("PUT", "/v1/sandboxes/{id}/files/{path*}", noop).ok());
  ASSERT_TRUE(router.Add("GET", "/", noop).ok());

  auto m = router.Find("GET", "/v1/sandboxes/stats");
  ASSERT_EQ(m.outcome, Router::Outcome::kMatched);
  EXPECT_EQ(m.route->pattern, "/v1/sandboxes/stats");
  m = router.Find("GET", "/v1/sandboxes/abc");
  EXPECT_EQ(m.route->pattern, "/v1/sandboxes/{id}");
  EXPECT_EQ(m.params["id"], "abc");
  m = router.Find("GET", "/v1/pools/abc");
  EXPECT_EQ(m.route->pattern, "/v1/{kind}/{id}");
  EXPECT_EQ(m.params["kind"], "pools");
  m = router.Find("PUT", "/v1/sandboxes/a/files/x/y%20z");
  ASSERT_EQ(m.outcome, Router::Outcome::kMatched);
  EXPECT_EQ(m.params["path"], "x/y z");
  EXPECT_EQ(router.Find("GET", "/").outcome, Router::Outcome::kMatched);
  EXPECT_EQ(router.Find("GET", "/v1//x").outcome, Router::Outcome::kNotFound);
  EXPECT_EQ(router.Find("GET", "/v1/sandboxes/abc/").outcome, Router::Outcome::kNotFound);

  m = router.Find("DELETE", "/v1/sandboxes/a/files/x");
  EXPECT_EQ(m.outcome, Router::Outcome::kMethodNotAllowed);
  EXPECT_EQ(m.allowed_methods, (std::vector<std::string>{"GET", "PUT"}));
  EXPECT_EQ(router.Find("GET", "nope").outcome, Router::Outcome::kBadPath);
  EXPECT_EQ(router.Find("GET", "/v1/sandboxes/%2e%2e").outcome, Router::Outcome::kBadPath);
}

}  // namespace
}  // namespace paddock::api
