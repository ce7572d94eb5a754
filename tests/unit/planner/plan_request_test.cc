#include "planner/plan_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace paddock::planner {
namespace {

using nlohmann::json;

TEST(PlannerRequestTest, ParsesEveryField) {
  json j = {{"task", "build the site"},
            {"plan_steps", {"clone", "build"}},
            {"commands", {"npm ci", "npm run build"}},
            {"languages", {"typescript"}},
            {"repo_size_bytes", 123456789},
            {"dependencies", {"react"}},
            {"needs_browser", false},
            {"needs_compile", true},
            {"needs_gpu", false},
            {"expected_duration_seconds", 600},
            {"network", "package-registries"},
            {"workspace_bytes", 1000},
            {"risk_level", "low"}};
  auto r = PlanRequestFromJson(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->task, "build the site");
  EXPECT_EQ(r->commands.size(), 2u);
  EXPECT_EQ(r->repo_size_bytes, 123456789u);
  EXPECT_TRUE(r->needs_compile);
  EXPECT_EQ(r->expected_duration_seconds, 600);
  EXPECT_EQ(r->network, "package-registries");
  EXPECT_EQ(r->workspace_bytes, 1000u);
  EXPECT_EQ(r->risk_level, "low");
  EXPECT_EQ(r->tenant_id, "");
  // Round trip.
  auto again = PlanRequestFromJson(PlanRequestToJson(*r));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *r);
}

TEST(PlannerRequestTest, ErrorsNameTheField) {
  struct Case {
    json input;
    std::string error;
  };
  const Case cases[] = {
      {json::array(), "plan: must be an object"},
      {{{"commands", {"ls", "pwd", 3}}}, "plan.commands[2]: must be a string"},
      {{{"commands", "ls"}}, "plan.commands: must be a list of strings"},
      {{{"task", 5}}, "plan.task: must be a string"},
      {{{"needs_gpu", "yes"}}, "plan.needs_gpu: must be true or false"},
      {{{"repo_size_bytes", -1}}, "plan.repo_size_bytes: -1 is out of range"},
      {{{"repo_size_bytes", 1.5}}, "plan.repo_size_bytes: 1.5 is not an integer"},
      {{{"expected_duration_seconds", "10m"}},
       "plan.expected_duration_seconds: must be an integer"},
      {{{"network", "internet"}}, "plan.network: 'internet' is not one of none"},
      {{{"risk_level", "extreme"}}, "plan.risk_level: 'extreme' is not one of low"},
      {{{"tenant_id", "other-tenant"}}, "plan.tenant_id: unknown field"},
      {{{"taks", "typo"}}, "plan.taks: unknown field"},
  };
  for (const Case& c : cases) {
    auto r = PlanRequestFromJson(c.input);
    ASSERT_FALSE(r.ok()) << c.input.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(r.status().message().starts_with(c.error))
        << "got: " << r.status().message() << "\nwant: " << c.error;
  }
}

TEST(PlannerRequestTest, SizeLimitsBoundHostileInput) {
  EXPECT_TRUE(PlanRequestFromJson({{"task", std::string(kMaxTaskBytes, 'a')}}).ok());
  auto big = PlanRequestFromJson({{"task", std::string(kMaxTaskBytes + 1, 'a')}});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), "plan.task: longer than 65536 bytes");

  json many = json::array();
  for (size_t i = 0; i <= kMaxListItems; ++i) many.push_back("ls");
  auto too_many = PlanRequestFromJson({{"commands", many}});
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().message(), "plan.commands: more than 200 items");

  auto long_step =
      PlanRequestFromJson({{"plan_steps", {"ok", std::string(kMaxItemBytes + 1, 'x')}}});
  ASSERT_FALSE(long_step.ok());
  EXPECT_EQ(long_step.status().message(), "plan.plan_steps[1]: longer than 8192 bytes");
}

TEST(PlannerRequestTest, InputHashIsCanonicalAndIgnoresTheTenant) {
  PlanRequest a;
  a.task = "print hello";
  a.commands = {"python -c 'print(1)'"};
  PlanRequest b = a;
  b.tenant_id = "someone-else";
  EXPECT_EQ(PlanRequestHash(a), PlanRequestHash(b));
  EXPECT_EQ(PlanRequestHash(a).size(), 64u);
  b.commands.push_back("ls");
  EXPECT_NE(PlanRequestHash(a), PlanRequestHash(b));
  // Field order in the JSON a caller sends does not matter.
  auto x = PlanRequestFromJson(json::parse(R"({"task": "t", "needs_gpu": true})"));
  auto y = PlanRequestFromJson(json::parse(R"({"needs_gpu": true, "task": "t"})"));
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(PlanRequestHash(*x), PlanRequestHash(*y));
  // Known value: sha256 of the canonical JSON.
  EXPECT_EQ(PlanRequestHash(PlanRequest{}),
            Sha256Hex(R"({"commands":[],"dependencies":[],"languages":[],"needs_browser":false,)"
                      R"("needs_compile":false,"needs_gpu":false,"network":"","plan_steps":[],)"
                      R"("risk_level":"","task":""})"));
  // Invalid UTF-8 still hashes.
  PlanRequest bad;
  bad.task = "\xff\xfe";
  EXPECT_EQ(PlanRequestHash(bad).size(), 64u);
}

TEST(PlannerRequestTest, IntentJsonRoundTrips) {
  ResourceIntent i;
  i.resource_class = "browser-medium";
  i.cpu = 4;
  i.memory_mb = 8192;
  i.disk_gb = 30;
  i.runtime = "native";
  i.template_name = "host";
  i.network_profile = "web";
  i.ttl_seconds = 2400;
  i.confidence = 0.91;
  i.reasons = {"rule 'browser' matched"};
  i.planner = "builtin";
  i.workload_signature = "ws-0123456789abcdef";
  i.command_signature = "wc-0123456789abcdef";
  i.input_hash = std::string(64, 'a');
  json j = ResourceIntentToJson(i);
  EXPECT_EQ(j["template"], "host");
  auto back = ResourceIntentFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, i);
  j["cpu"] = "four";
  EXPECT_EQ(ResourceIntentFromJson(j).status().message(), "intent.cpu: must be a number");
  j["cpu"] = 4;
  j["gpu"] = 1;
  EXPECT_EQ(ResourceIntentFromJson(j).status().message(), "intent.gpu: unknown field");
}

TEST(PlannerRequestTest, BoundedQuoteCutsSafely) {
  EXPECT_EQ(BoundedQuote("hello", 10), "hello");
  EXPECT_EQ(BoundedQuote("hello world", 5), "hello...");
  EXPECT_EQ(BoundedQuote("a\nb\tc", 10), "a b c");
  // Never splits a multi-byte character; invalid bytes become '?'.
  EXPECT_EQ(BoundedQuote("\xc3\xa9\xc3\xa9", 3), "\xc3\xa9...");
  EXPECT_EQ(BoundedQuote("a\xff"
                         "b",
                         10),
            "a?b");
  EXPECT_EQ(BoundedQuote("\xed\xa0\x80", 10), "???");  // a UTF-16 surrogate
  EXPECT_NO_THROW(json(BoundedQuote("\xc0\xaf\xfe", 10)).dump());
}

TEST(PlannerRequestTest, NetworkProfileRanks) {
  EXPECT_EQ(NetworkProfileRank("none"), 0);
  EXPECT_EQ(NetworkProfileRank("package-registries"), 1);
  EXPECT_EQ(NetworkProfileRank("web"), 2);
  EXPECT_EQ(NetworkProfileRank("internet"), -1);
  EXPECT_EQ(NetworkProfileRank(""), -1);
}

}  // namespace
}  // namespace paddock::planner
