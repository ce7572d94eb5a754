#include "common/status.h"

#include <gtest/gtest.h>

namespace paddock {
namespace {

Result<int> Half(int v) {
  if (v % 2) return InvalidArgument("odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  PADDOCK_ASSIGN_OR_RETURN(int h, Half(v));
  return Half(h);
}

TEST(StatusTest, ErrnoMapsToCode) {
  Status s = ErrnoStatus("open x", ENOENT);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.err(), ENOENT);
  EXPECT_NE(s.message().find("open x"), std::string::npos);
  EXPECT_EQ(ErrnoStatus("w", ENOSPC).code(), StatusCode::kResourceExhausted);
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_FALSE(Quarter(6).ok());
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  Result<int> bogus{Status::Ok()};
  EXPECT_FALSE(bogus.ok());
}

}  // namespace
}  // namespace paddock
