#include "common/units.h"

#include <gtest/gtest.h>

namespace paddock {
namespace {

TEST(UnitsTest, ParsesSizes) {
  EXPECT_EQ(*ParseSize("1048576", "m"), 1048576u);
  EXPECT_EQ(*ParseSize("512M", "m"), 512ull << 20);
  EXPECT_EQ(*ParseSize("2GiB", "m"), 2ull << 30);
  EXPECT_EQ(*ParseSize("1.5g", "m"), 3ull << 29);
  EXPECT_EQ(*ParseSize("64k", "m"), 65536u);
}

TEST(UnitsTest, RejectsBadSizesNamingTheField) {
  for (const char* bad : {"", "-1", "12X", "abc", "1e9", "nanG"}) {
    auto r = ParseSize(bad, "memory");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("memory:", 0), 0u) << r.status().message();
  }
  EXPECT_FALSE(ParseSize("99999999T", "memory").ok());
}

TEST(UnitsTest, ParsesDurations) {
  EXPECT_EQ(ParseDuration("30", "t")->count(), 30000);
  EXPECT_EQ(ParseDuration("500ms", "t")->count(), 500);
  EXPECT_EQ(ParseDuration("1.5s", "t")->count(), 1500);
  EXPECT_EQ(ParseDuration("2m", "t")->count(), 120000);
  EXPECT_FALSE(ParseDuration("5 parsecs", "timeout").ok());
  EXPECT_FALSE(ParseDuration("-3", "timeout").ok());
}

}  // namespace
}  // namespace paddock
