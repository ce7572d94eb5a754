// Strict reading of JSON objects from untrusted sources (API callers, an LLM's answer): every
// error names the field's path ("plan.commands[2]: must be a string"), unknown keys are
// reported, and nothing throws. Internal to src/planner.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace paddock::planner::json_fields {

inline std::string Child(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& json, std::string path)
      : json_(json), path_(std::move(path)) {}

  // kInvalidArgument unless the value is an object.
  Status CheckObject() const {
    if (!json_.is_object()) return InvalidArgument(path_ + ": must be an object");
    return Status::Ok();
  }

  // The keys not in `allowed`, in document (sorted) order.
  std::vector<std::string> UnknownKeys(std::initializer_list<std::string_view> allowed) const {
    std::vector<std::string> out;
    for (const auto& [key, value] : json_.items()) {
      bool known = false;
      for (std::string_view a : allowed) known = known || key == a;
      if (!known) out.push_back(key);
    }
    return out;
  }

  Status RejectUnknown(std::initializer_list<std::string_view> allowed) const {
    std::vector<std::string> unknown = UnknownKeys(allowed);
    if (!unknown.empty()) return InvalidArgument(Child(path_, unknown[0]) + ": unknown field");
    return Status::Ok();
  }

  bool Has(std::string_view key) const {
    auto it = json_.find(key);
    return it != json_.end() && !it->is_null();
  }
  std::string PathOf(std::string_view key) const { return Child(path_, key); }

  Status String(std::string_view key, size_t max_bytes, std::string* out) const {
    if (!Has(key)) return Status::Ok();
    const nlohmann::json& v = json_.at(key);
    if (!v.is_string()) return InvalidArgument(PathOf(key) + ": must be a string");
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > max_bytes) {
      return InvalidArgument(PathOf(key) + ": longer than " + std::to_string(max_bytes) + " bytes");
    }
    *out = s;
    return Status::Ok();
  }

  Status StringList(std::string_view key, size_t max_items, size_t max_bytes,
                    std::vector<std::string>* out) const {
    if (!Has(key)) return Status::Ok();
    const nlohmann::json& v = json_.at(key);
    if (!v.is_array()) return InvalidArgument(PathOf(key) + ": must be a list of strings");
    if (v.size() > max_items) {
      return InvalidArgument(PathOf(key) + ": more than " + std::to_string(max_items) + " items");
    }
    out->clear();
    for (size_t i = 0; i < v.size(); ++i) {
      std::string where = PathOf(key) + "[" + std::to_string(i) + "]";
      if (!v[i].is_string()) return InvalidArgument(where + ": must be a string");
      const std::string& s = v[i].get_ref<const std::string&>();
      if (s.size() > max_bytes) {
        return InvalidArgument(where + ": longer than " + std::to_string(max_bytes) + " bytes");
      }
      out->push_back(s);
    }
    return Status::Ok();
  }

  Status Bool(std::string_view key, bool* out) const {
    if (!Has(key)) return Status::Ok();
    const nlohmann::json& v = json_.at(key);
    if (!v.is_boolean()) return InvalidArgument(PathOf(key) + ": must be true or false");
    *out = v.get<bool>();
    return Status::Ok();
  }

  // A JSON number (integers and floats alike) that is finite and within [min, max].
  Status Number(std::string_view key, double min, double max, std::optional<double>* out) const {
    if (!Has(key)) return Status::Ok();
    const nlohmann::json& v = json_.at(key);
    if (!v.is_number()) return InvalidArgument(PathOf(key) + ": must be a number");
    double d = v.get<double>();
    if (!std::isfinite(d) || d < min || d > max) {
      return InvalidArgument(PathOf(key) + ": " + v.dump() + " is out of range [" + Fmt(min) +
                             ", " + Fmt(max) + "]");
    }
    *out = d;
    return Status::Ok();
  }

  // A JSON integer (a float with a fractional part is refused) within [min, max].
  Status Integer(std::string_view key, int64_t min, int64_t max,
                 std::optional<int64_t>* out) const {
    if (!Has(key)) return Status::Ok();
    const nlohmann::json& v = json_.at(key);
    int64_t i = 0;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return InvalidArgument(PathOf(key) + ": " + v.dump() + " is out of range");
      }
      i = v.get<int64_t>();
    } else if (v.is_number_float()) {
      double d = v.get<double>();
      // 2^63 itself is not representable as int64_t.
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) >= 9.2e18) {
        return InvalidArgument(PathOf(key) + ": " + v.dump() + " is not an integer");
      }
      i = static_cast<int64_t>(d);
    } else {
      return InvalidArgument(PathOf(key) + ": must be an integer");
    }
    if (i < min || i > max) {
      return InvalidArgument(PathOf(key) + ": " + std::to_string(i) + " is out of range [" +
                             std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    *out = i;
    return Status::Ok();
  }

 private:
  static std::string Fmt(double d) {
    std::string s = nlohmann::json(d).dump();
    if (s.size() > 2 && s.ends_with(".0")) s.resize(s.size() - 2);
    return s;
  }

  const nlohmann::json& json_;
  std::string path_;
};

}  // namespace paddock::planner::json_fields
