#include "planner/rules.h"

#include <gtest/gtest.h>

#include <string>

#include "planner_test_support.h"

namespace paddock::planner {
namespace {

using testing::DefaultClasses;
using testing::ShippedConfig;
using testing::Task;

constexpr const char* kMinimal = R"(
default_class: python-small
rules:
  - name: browser
    when: {any_of: [cap:browser]}
    class: browser-medium
)";

// Parses kMinimal with `extra` appended; returns the error message ("" when it parsed).
std::string ErrorOf(const std::string& yaml) {
  auto r = ParsePlannerConfig(yaml, DefaultClasses());
  return r.ok() ? "" : r.status().message();
}

TEST(RulesTest, ShippedFileParsesWithRulesForEveryDefaultClass) {
  PlannerConfig c = ShippedConfig();
  EXPECT_EQ(c.default_class, "python-small");
  EXPECT_EQ(c.default_ttl_seconds, 30 * 60);
  ASSERT_GE(c.rules.size(), 5u);
  std::set<std::string> classes = {c.default_class};
  for (const PlannerRule& r : c.rules) classes.insert(r.class_name);
  for (const ResourceClass& rc : DefaultClasses()) EXPECT_TRUE(classes.count(rc.name)) << rc.name;
  EXPECT_EQ(c.rules[0].name, "browser");
  EXPECT_EQ(c.rules[0].ttl_seconds, 40 * 60);
  EXPECT_EQ(c.rules[0].network_profile, "web");
  EXPECT_EQ(c.history.min_samples, 3);
  EXPECT_DOUBLE_EQ(c.history.headroom, 1.3);
  EXPECT_EQ(c.history.min_memory_mb, 256);
  EXPECT_EQ(c.policy.defaults.allowed_classes.size(), 5u);
  EXPECT_DOUBLE_EQ(c.policy.defaults.max_cpu, 8);
  EXPECT_EQ(c.policy.defaults.max_memory_bytes, 16ull << 30);
  EXPECT_EQ(c.policy.defaults.max_ttl_seconds, 4 * 3600);
  EXPECT_EQ(c.policy.defaults.on_violation, OnViolation::kClamp);
  EXPECT_TRUE(c.policy.tenants.empty());
  EXPECT_FALSE(c.external.enabled);
  EXPECT_EQ(c.external.api_key_env, "PADDOCK_PLANNER_API_KEY");
  EXPECT_EQ(c.external.timeout, std::chrono::seconds(10));
}

struct RoutingCase {
  PlanRequest request;
  const char* rule;  // "" = default class
};

TEST(RulesTest, ShippedRulesRouteRealisticTasks) {
  PlannerConfig c = ShippedConfig();
  PlanRequest big_repo = Task("run the unit tests");
  big_repo.repo_size_bytes = 3ull << 30;
  const RoutingCase cases[] = {
      {Task("print hello world"), ""},
      {Task("write a python script that prints the first 20 primes"), ""},
      {Task("summarise sales.csv with pandas"), "data-analysis"},
      {Task("", {"pip install numpy scipy", "python fit.py"}), "data-analysis"},
      {Task("import pandas\ndf = pd.read_csv('20GB.csv')"), "large-data"},
      {Task("fine-tune a model", {"pip install torch transformers"}), "heavy-compute"},
      {Task("", {"cargo build --release"}), "build"},
      {Task("", {"./gradlew test"}), "build"},
      {Task("build the frontend", {"npm ci", "npm run build"}), "build"},
      {Task("screenshot the login page", {"npx playwright install chromium"}), "browser"},
      {Task("", {},
            {"clone repo", "npm install", "install playwright", "build frontend", "run chromium",
             "capture screenshot"}),
       "browser"},
      {big_repo, "large-repo"},
      {Task("deduplicate a 600 MB log file"), "medium-data"},
  };
  for (const RoutingCase& rc : cases) {
    WorkloadFeatures f = ExtractFeatures(rc.request);
    const PlannerRule* rule = FirstMatchingRule(c, f, rc.request);
    EXPECT_EQ(rule ? rule->name : "", rc.rule)
        << rc.request.task << " / " << f.signature_key << " data " << f.data_bytes;
  }
}

TEST(RulesTest, ConditionPartsAllMustHold) {
  RuleCondition when;
  when.all_of = {"lang:python"};
  when.any_of = {"pkg:pandas", "pkg:polars"};
  when.none_of = {"cap:browser"};
  when.min_data_bytes = 1ull << 30;
  WorkloadFeatures f;
  f.tags = {"lang:python", "pkg:polars"};
  f.data_bytes = 2ull << 30;
  PlanRequest r;
  EXPECT_TRUE(RuleMatches(when, f, r));
  f.data_bytes = 1ull << 20;
  EXPECT_FALSE(RuleMatches(when, f, r));
  f.data_bytes = 2ull << 30;
  f.tags.insert("cap:browser");
  EXPECT_FALSE(RuleMatches(when, f, r));
  f.tags = {"pkg:polars"};
  EXPECT_FALSE(RuleMatches(when, f, r));
  RuleCondition duration;
  duration.min_duration_seconds = 600;
  r.expected_duration_seconds = 599;
  EXPECT_FALSE(RuleMatches(duration, f, r));
  r.expected_duration_seconds = 600;
  EXPECT_TRUE(RuleMatches(duration, f, r));
}

TEST(RulesTest, FirstMatchWinsInFileOrder) {
  auto c = ParsePlannerConfig(R"(
default_class: python-small
rules:
  - name: first
    when: {any_of: [pkg:pandas]}
    class: python-medium
  - name: second
    when: {all_of: [pkg:pandas, lang:python]}
    class: compute-large
)",
                              DefaultClasses());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  PlanRequest r = Task("import pandas");
  EXPECT_EQ(FirstMatchingRule(*c, ExtractFeatures(r), r)->name, "first");
  EXPECT_EQ(FirstMatchingRule(*c, ExtractFeatures(Task("hi")), r), nullptr);
}

TEST(RulesTest, BadFilesGivePathNamingErrors) {
  struct Case {
    std::string yaml;
    std::string error;
  };
  const std::string rules_head = "default_class: python-small\nrules:\n";
  const Case cases[] = {
      {rules_head + "  - {name: a, when: {any_of: [cap:browser]}, class: x}\n",
       "rules[0].class: unknown resource class 'x'"},
      {rules_head + "  - {name: a, when: {any_of: [cap:browser]}, class: python-small}\n" +
           "  - {name: b, when: {any_of: [cap:gpu]}, class: python-small}\n" +
           "  - {name: c, when: {any_of: [cap:gpu]}, class: gpu-xxl}\n",
       "rules[2].class: unknown resource class 'gpu-xxl'"},
      {rules_head + "  - {name: a, when: {any_of: [cap:browsr]}, class: python-small}\n",
       "rules[0].when.any_of[0]: unknown tag 'cap:browsr'"},
      {rules_head + "  - {name: a, when: {anyof: [cap:browser]}, class: python-small}\n",
       "rules[0].when.anyof: unknown key"},
      {rules_head + "  - {name: a, when: {}, class: python-small}\n",
       "rules[0].when: matches every task"},
      {rules_head + "  - {name: a, when: {min_data: lots}, class: python-small}\n",
       "rules[0].when.min_data: 'lots' is not a size"},
      {rules_head + "  - {name: a, when: {any_of: [cap:gpu]}, class: python-small, ttl: 48h}\n",
       "rules[0].ttl: 48h is longer than the maximum 86400s"},
      {rules_head + "  - {name: a, when: {any_of: [cap:gpu]}, class: python-small}\n" +
           "  - {name: a, when: {any_of: [cap:gpu]}, class: python-small}\n",
       "rules[1].name: duplicate rule 'a'"},
      {rules_head +
           "  - {name: a, when: {any_of: [cap:gpu]}, class: python-small, network_profile: "
           "internet}\n",
       "rules[0].network_profile: unknown network profile 'internet'"},
      {rules_head + "  - {name: a, when: {any_of: [cap:gpu]}, klass: python-small}\n",
       "rules[0].klass: unknown key"},
      {rules_head + "  - {name: a, when: {any_of: [cap:gpu]}}\n", "rules[0].class: required"},
      {"rules: []\n", "default_class: required"},
      {"default_class: python-small\n", "rules: required"},
      {"default_class: nope\nrules: []\n", "default_class: unknown resource class 'nope'"},
      {"default_class: python-small\nrules: []\nhistory: {headroom: 0.5}\n",
       "history.headroom: 0.5 is out of range"},
      {"default_class: python-small\nrules: []\nhistory: {min_samples: 9, window: 5}\n",
       "history.min_samples: larger than history.window"},
      {"default_class: python-small\nrules: []\npolicy: {default: {allowed_classes: [huge]}}\n",
       "policy.default.allowed_classes[0]: unknown resource class 'huge'"},
      {"default_class: python-small\nrules: []\npolicy: {default: {on_violation: shrug}}\n",
       "policy.default.on_violation: 'shrug' is not one of clamp, deny"},
      {"default_class: python-small\nrules: []\npolicy: {tenants: {acme: {max_cpux: 2}}}\n",
       "policy.tenants.acme.max_cpux: unknown key"},
      {"default_class: python-small\nrules: []\npolicy: {tenants: {acme: {max_ttl: 2d}}}\n",
       "policy.tenants.acme.max_ttl: unknown unit 'd'"},
      {"default_class: python-small\nrules: []\nexternal: {enabled: true, model: m}\n",
       "external.url: required"},
      {"default_class: python-small\nrules: []\nexternal: {url: 'https://api.example', model: "
       "m}\n",
       "external.url:"},
      {"default_class: python-small\nrules: []\nexternal: {api_key: a, api_key_env: B}\n",
       "external.api_key: give api_key or api_key_env, not both"},
      {"default_class: python-small\nrules: []\nsurprise: 1\n", "surprise: unknown key"},
      {"default_class: [python-small\n", "yaml: line"},
  };
  for (const Case& c : cases) {
    std::string error = ErrorOf(c.yaml);
    EXPECT_TRUE(error.starts_with(c.error))
        << "got: " << error << "\nwant: " << c.error << "\nfor:\n"
        << c.yaml;
  }
}

TEST(RulesTest, TenantPoliciesInheritTheDefault) {
  auto c = ParsePlannerConfig(std::string(kMinimal) + R"(
policy:
  default:
    max_cpu: 8
    max_memory: 16GiB
    on_violation: clamp
  tenants:
    free-tier:
      allowed_classes: [python-small]
      max_cpu: 1
      on_violation: deny
      max_network_profile: none
)",
                              DefaultClasses());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const TenantPolicy& free = c->policy.ForTenant("t-123", "free-tier");
  EXPECT_EQ(free.allowed_classes, std::vector<std::string>{"python-small"});
  EXPECT_DOUBLE_EQ(free.max_cpu, 1);
  EXPECT_EQ(free.max_memory_bytes, 16ull << 30);  // inherited
  EXPECT_EQ(free.on_violation, OnViolation::kDeny);
  EXPECT_EQ(free.max_network_profile, "none");
  EXPECT_EQ(c->policy.KeyFor("t-123", "free-tier"), "free-tier");
  // Unknown tenants get the default, which allows every class when not listed.
  const TenantPolicy& other = c->policy.ForTenant("t-9", "acme");
  EXPECT_EQ(other.allowed_classes.size(), DefaultClasses().size());
  EXPECT_EQ(other.on_violation, OnViolation::kClamp);
  EXPECT_EQ(c->policy.KeyFor("t-9", "acme"), "");
}

TEST(RulesTest, LoadFileErrorsNameTheFile) {
  auto r = LoadPlannerConfigFile("/nonexistent/planner.yaml", DefaultClasses());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/planner.yaml"), std::string::npos);
}

TEST(RulesTest, MinimalConfigUsesTheSmallestClass) {
  PlannerConfig c = MinimalPlannerConfig(DefaultClasses());
  EXPECT_EQ(c.default_class, "python-small");
  EXPECT_TRUE(c.rules.empty());
  EXPECT_EQ(c.policy.defaults.allowed_classes.size(), 5u);
}

}  // namespace
}  // namespace paddock::planner
