#include "api/http_message.h"

#include <algorithm>
#include <cctype>

namespace paddock::api {
namespace {

char LowerAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (LowerAscii(a[i]) != LowerAscii(b[i])) return false;
  }
  return true;
}

bool IsValidHeaderField(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  if (!std::all_of(name.begin(), name.end(), IsTokenChar)) return false;
  return value.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

Headers::Headers(std::initializer_list<std::pair<std::string, std::string>> fields)
    : fields_(fields) {}

void Headers::Add(std::string name, std::string value) {
  fields_.emplace_back(std::move(name), std::move(value));
}

void Headers::Set(std::string name, std::string value) {
  Remove(name);
  Add(std::move(name), std::move(value));
}

void Headers::Remove(std::string_view name) {
  std::erase_if(fields_, [&](const auto& f) { return EqualsIgnoreCase(f.first, name); });
}

std::optional<std::string> Headers::Find(std::string_view name) const {
  for (const auto& [n, v] : fields_) {
    if (EqualsIgnoreCase(n, name)) return v;
  }
  return std::nullopt;
}

std::string Headers::Get(std::string_view name, std::string_view fallback) const {
  auto v = Find(name);
  return v ? *v : std::string(fallback);
}

bool Headers::Has(std::string_view name) const { return Find(name).has_value(); }

std::vector<std::string> Headers::GetAll(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : fields_) {
    if (EqualsIgnoreCase(n, name)) out.push_back(v);
  }
  return out;
}

std::string Request::Param(std::string_view name) const {
  auto it = params.find(std::string(name));
  return it == params.end() ? std::string() : it->second;
}

std::optional<std::string> Request::Query(std::string_view name) const {
  auto it = query.find(std::string(name));
  if (it == query.end()) return std::nullopt;
  return it->second;
}

Response JsonResponse(int http_status, const nlohmann::json& body) {
  Response r;
  r.status = http_status;
  r.content_type = "application/json";
  // Replace invalid UTF-8 rather than throwing: error messages may echo caller input.
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

Response ErrorResponse(int http_status, std::string code, std::string message,
                       nlohmann::json details) {
  if (details.is_null()) details = nlohmann::json::object();
  nlohmann::json body = {{"error",
                          {{"code", std::move(code)},
                           {"message", std::move(message)},
                           {"details", std::move(details)}}}};
  return JsonResponse(http_status, body);
}

int StatusToHttp(const Status& status, int resource_exhausted_http) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kConflict:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kResourceExhausted:
      return resource_exhausted_http;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

std::string StatusCodeSlug(StatusCode code) {
  std::string s = StatusCodeName(code);
  for (char& c : s) c = LowerAscii(c);
  return s;
}

Response ErrorFromStatus(const Status& status, nlohmann::json details,
                         int resource_exhausted_http) {
  if (status.ok()) {
    return ErrorResponse(500, "internal", "an error was reported without a cause",
                         std::move(details));
  }
  return ErrorResponse(StatusToHttp(status, resource_exhausted_http), StatusCodeSlug(status.code()),
                       status.message(), std::move(details));
}

Result<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return InvalidArgument("truncated percent-escape");
      int hi = HexValue(text[i + 1]);
      int lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgument("malformed percent-escape");
      char decoded = static_cast<char>(hi * 16 + lo);
      if (decoded == '\0') return InvalidArgument("percent-escape decodes to NUL");
      out.push_back(decoded);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string PercentEncode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    bool unreserved = std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Result<std::map<std::string, std::string>> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view pair = query.substr(pos, amp - pos);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      std::string_view raw_key = pair.substr(0, eq);
      std::string_view raw_value =
          eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
      PADDOCK_ASSIGN_OR_RETURN(std::string key, PercentDecode(raw_key, true));
      PADDOCK_ASSIGN_OR_RETURN(std::string value, PercentDecode(raw_value, true));
      out.emplace(std::move(key), std::move(value));  // emplace keeps the first occurrence
    }
    pos = amp + 1;
  }
  return out;
}

bool IsValidRequestId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

}  // namespace paddock::api
