#include "common/units.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace paddock {

namespace {

// Splits "12.5GiB" into 12.5 and "gib" (lower-cased). Rejects empty, negative, NaN.
bool SplitNumber(std::string_view text, double* value, std::string* unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  std::string num(text.substr(0, i));
  char* end = nullptr;
  *value = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(*value) || *value < 0) return false;
  unit->clear();
  for (char c : text.substr(i)) unit->push_back(static_cast<char>(std::tolower(c)));
  return true;
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text, std::string_view field) {
  double v;
  std::string unit;
  auto bad = [&] {
    return InvalidArgument(std::string(field) + ": '" + std::string(text) +
                           "' is not a size (e.g. 512M, 2GiB, 1048576)");
  };
  if (!SplitNumber(text, &v, &unit)) return bad();
  double mult;
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else if (unit == "k" || unit == "kb" || unit == "kib") {
    mult = 1024.0;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    mult = 1024.0 * 1024;
  } else if (unit == "g" || unit == "gb" || unit == "gib") {
    mult = 1024.0 * 1024 * 1024;
  } else if (unit == "t" || unit == "tb" || unit == "tib") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return bad();
  }
  double bytes = v * mult;
  if (bytes > 9.0e18) return InvalidArgument(std::string(field) + ": too large");
  return static_cast<uint64_t>(bytes);
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text, std::string_view field) {
  double v;
  std::string unit;
  if (!SplitNumber(text, &v, &unit))
    return InvalidArgument(std::string(field) + ": '" + std::string(text) +
                           "' is not a duration (e.g. 30, 30s, 500ms, 5m)");
  double ms;
  if (unit.empty() || unit == "s") {
    ms = v * 1000;
  } else if (unit == "ms") {
    ms = v;
  } else if (unit == "m") {
    ms = v * 60000;
  } else if (unit == "h") {
    ms = v * 3600000;
  } else {
    return InvalidArgument(std::string(field) + ": unknown unit '" + unit + "'");
  }
  if (ms > 1e15) return InvalidArgument(std::string(field) + ": too large");
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

}  // namespace paddock
