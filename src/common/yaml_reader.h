// Strict reading of YAML configuration files (paddock.yaml, planner.yaml): every error names
// the key's path ("pools[1].bufer: unknown key"), unknown and duplicate keys are errors, and
// typed getters leave their output alone when the key is absent (so defaults stay).
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace paddock {

// "a.b" / "b" (at the root) and "a[3]": key paths in messages.
std::string YamlChild(const std::string& path, std::string_view key);
std::string YamlElement(const std::string& path, size_t i);

// [a-z0-9][a-z0-9._-]{0,62}: class, template, rule and security-level names end up in ids,
// paths and API filters, so they share the template store's rule.
bool ValidName(const std::string& name);

// Reads a configuration file whole; `what` names it in errors ("open config /etc/x.yaml: ...").
// A configuration is a few KiB: a file over 16 MiB is a mistake (or /dev/zero), not a config.
Result<std::string> ReadConfigFile(const std::string& path, std::string_view what);

class YamlMapReader {
 public:
  // `path` is the mapping's own path ("" at the root); `root_name` names the document in
  // messages about the root ("config", "planner config").
  YamlMapReader(const YAML::Node& node, std::string path, std::string root_name = "config");

  // Rejects keys outside `allowed` (in document order, so the first typo is the one reported),
  // non-scalar keys and duplicates; also a node that is not a mapping.
  Status Check(std::initializer_list<std::string_view> allowed) const;

  bool Has(std::string_view key) const { return static_cast<bool>(node_[std::string(key)]); }
  YAML::Node Get(std::string_view key) const { return node_[std::string(key)]; }
  std::string PathOf(std::string_view key) const { return YamlChild(path_, key); }
  Status Required(std::string_view key) const;

  Status String(std::string_view key, std::string* out) const;  // non-empty
  Status StringList(std::string_view key, std::vector<std::string>* out) const;
  Status Bool(std::string_view key, bool* out) const;  // true | false only
  // One of a fixed set of words, each standing for a value ("'x' is not one of a, b" else).
  template <typename T>
  Status Choice(std::string_view key, std::initializer_list<std::pair<std::string_view, T>> choices,
                T* out) const {
    if (!Has(key)) return Status::Ok();
    std::string word;
    PADDOCK_RETURN_IF_ERROR(String(key, &word));
    std::string names;
    for (const auto& [name, value] : choices) {
      if (name == word) {
        *out = value;
        return Status::Ok();
      }
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    return InvalidArgument(PathOf(key) + ": '" + word + "' is not one of " + names);
  }
  Status Unsigned(std::string_view key, uint64_t max, uint64_t* out) const;
  template <typename T>
  Status UnsignedAs(std::string_view key, uint64_t min, uint64_t max, T* out) const {
    uint64_t v = *out;
    PADDOCK_RETURN_IF_ERROR(Unsigned(key, max, &v));
    if (Has(key) && v < min) {
      return InvalidArgument(PathOf(key) + ": must be at least " + std::to_string(min));
    }
    *out = static_cast<T>(v);
    return Status::Ok();
  }
  Status Integer(std::string_view key, int64_t min, int64_t max, int64_t* out) const;
  // Plain decimals only ("0x10", "inf", " 2" are not numbers).
  Status Number(std::string_view key, double min, double max, double* out) const;
  Status PositiveNumber(std::string_view key, double* out) const;  // > 0
  // Sizes and durations must be positive: a zero limit or timeout is never what was meant.
  Status Size(std::string_view key, uint64_t* out) const;
  Status Duration(std::string_view key, std::chrono::milliseconds* out) const;
  Status Seconds(std::string_view key, int64_t max_seconds, int64_t* out) const;  // whole, >= 1

 private:
  std::string Where() const { return path_.empty() ? root_name_ : path_; }
  Result<std::string> Text(std::string_view key) const;
  // Parses a plain decimal; kInvalidArgument "is not a number" otherwise.
  Result<double> Decimal(std::string_view key, const std::string& text) const;

  const YAML::Node& node_;
  std::string path_;
  std::string root_name_;
};

}  // namespace paddock
