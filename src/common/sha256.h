// SHA-256 through OpenSSL, as lower-case hex: content digests, request hashes, API key hashes.
#pragma once

#include <string>
#include <string_view>

namespace paddock {

// 64 lower-case hex digits of sha256(data).
std::string Sha256Hex(std::string_view data);

}  // namespace paddock
