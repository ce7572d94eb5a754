#include "common/sha256.h"

#include <openssl/evp.h>

namespace paddock {

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int k = 0; k < len; ++k) {
    out.push_back(kHex[digest[k] >> 4]);
    out.push_back(kHex[digest[k] & 0xf]);
  }
  return out;
}

}  // namespace paddock
