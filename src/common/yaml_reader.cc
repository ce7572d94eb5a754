#include "common/yaml_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include "common/unique_fd.h"
#include "common/units.h"

namespace paddock {

std::string YamlChild(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string YamlElement(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  auto lower_or_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_or_digit(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return lower_or_digit(c) || c == '.' || c == '_' || c == '-'; });
}

Result<std::string> ReadConfigFile(const std::string& path, std::string_view what) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + std::string(what) + " " + path);
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + std::string(what) + " " + path);
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (16u << 20)) return InvalidArgument(path + ": larger than 16 MiB");
  }
  return text;
}

YamlMapReader::YamlMapReader(const YAML::Node& node, std::string path, std::string root_name)
    : node_(node), path_(std::move(path)), root_name_(std::move(root_name)) {}

Status YamlMapReader::Check(std::initializer_list<std::string_view> allowed) const {
  if (!node_.IsMap()) return InvalidArgument(Where() + ": expected a mapping");
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) return InvalidArgument(Where() + ": keys must be plain strings");
    const std::string& key = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      return InvalidArgument(YamlChild(path_, key) + ": unknown key");
    if (!seen.insert(key).second) return InvalidArgument(YamlChild(path_, key) + ": duplicate key");
  }
  return Status::Ok();
}

Status YamlMapReader::Required(std::string_view key) const {
  if (!Has(key)) return InvalidArgument(PathOf(key) + ": required");
  return Status::Ok();
}

Result<std::string> YamlMapReader::Text(std::string_view key) const {
  YAML::Node v = Get(key);
  if (v.IsNull()) return InvalidArgument(PathOf(key) + ": missing value");
  if (!v.IsScalar()) return InvalidArgument(PathOf(key) + ": expected a single value");
  return v.Scalar();
}

Status YamlMapReader::String(std::string_view key, std::string* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(*out, Text(key));
  if (out->empty()) return InvalidArgument(PathOf(key) + ": must not be empty");
  return Status::Ok();
}

Status YamlMapReader::StringList(std::string_view key, std::vector<std::string>* out) const {
  if (!Has(key)) return Status::Ok();
  YAML::Node list = Get(key);
  if (!list.IsSequence()) return InvalidArgument(PathOf(key) + ": expected a list");
  out->clear();
  for (size_t i = 0; i < list.size(); ++i) {
    std::string where = YamlElement(PathOf(key), i);
    if (!list[i].IsScalar()) return InvalidArgument(where + ": expected a single value");
    if (list[i].Scalar().empty()) return InvalidArgument(where + ": must not be empty");
    out->push_back(list[i].Scalar());
  }
  return Status::Ok();
}

Status YamlMapReader::Bool(std::string_view key, bool* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
  if (text == "true") {
    *out = true;
  } else if (text == "false") {
    *out = false;
  } else {
    return InvalidArgument(PathOf(key) + ": '" + text + "' is not true or false");
  }
  return Status::Ok();
}

Status YamlMapReader::Unsigned(std::string_view key, uint64_t max, uint64_t* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
      end != text.data() + text.size() || ec == std::errc::invalid_argument) {
    return InvalidArgument(PathOf(key) + ": '" + text + "' is not a non-negative integer");
  }
  if (ec == std::errc::result_out_of_range || v > max) {
    return InvalidArgument(PathOf(key) + ": " + text + " is too large (max " + std::to_string(max) +
                           ")");
  }
  *out = v;
  return Status::Ok();
}

Status YamlMapReader::Integer(std::string_view key, int64_t min, int64_t max, int64_t* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument(PathOf(key) + ": '" + text + "' is not an integer");
  }
  if (v < min || v > max) {
    return InvalidArgument(
        fmt::format("{}: {} is out of range [{}, {}]", PathOf(key), v, min, max));
  }
  *out = v;
  return Status::Ok();
}

Result<double> YamlMapReader::Decimal(std::string_view key, const std::string& text) const {
  // Plain decimals only: strtod alone would also take "0x10", "inf" and " 2". A leading '-'
  // is let through so a negative value gets the range message.
  std::string_view digits = text;
  if (!digits.empty() && digits[0] == '-') digits.remove_prefix(1);
  bool decimal = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char ch) {
    return std::isdigit(static_cast<unsigned char>(ch)) || ch == '.';
  });
  char* end = nullptr;
  errno = 0;
  double v = decimal ? std::strtod(text.c_str(), &end) : 0;
  if (!decimal || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v)) {
    return InvalidArgument(PathOf(key) + ": '" + text + "' is not a number");
  }
  return v;
}

Status YamlMapReader::Number(std::string_view key, double min, double max, double* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
  PADDOCK_ASSIGN_OR_RETURN(double v, Decimal(key, text));
  if (v < min || v > max) {
    return InvalidArgument(
        fmt::format("{}: {} is out of range [{}, {}]", PathOf(key), text, min, max));
  }
  *out = v;
  return Status::Ok();
}

Status YamlMapReader::PositiveNumber(std::string_view key, double* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
  PADDOCK_ASSIGN_OR_RETURN(double v, Decimal(key, text));
  if (v <= 0) return InvalidArgument(PathOf(key) + ": must be greater than 0, got " + text);
  *out = v;
  return Status::Ok();
}

Status YamlMapReader::Size(std::string_view key, uint64_t* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
  PADDOCK_ASSIGN_OR_RETURN(uint64_t v, ParseSize(text, PathOf(key)));
  if (v == 0) return InvalidArgument(PathOf(key) + ": must be greater than 0");
  *out = v;
  return Status::Ok();
}

Status YamlMapReader::Duration(std::string_view key, std::chrono::milliseconds* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
  PADDOCK_ASSIGN_OR_RETURN(std::chrono::milliseconds v, ParseDuration(text, PathOf(key)));
  if (v.count() <= 0) return InvalidArgument(PathOf(key) + ": must be greater than 0");
  *out = v;
  return Status::Ok();
}

Status YamlMapReader::Seconds(std::string_view key, int64_t max_seconds, int64_t* out) const {
  if (!Has(key)) return Status::Ok();
  PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
  PADDOCK_ASSIGN_OR_RETURN(std::chrono::milliseconds v, ParseDuration(text, PathOf(key)));
  int64_t s = v.count() / 1000;
  if (s <= 0) return InvalidArgument(PathOf(key) + ": must be at least 1s");
  if (s > max_seconds) {
    return InvalidArgument(
        fmt::format("{}: {} is longer than the maximum {}s", PathOf(key), text, max_seconds));
  }
  *out = s;
  return Status::Ok();
}

}  // namespace paddock
