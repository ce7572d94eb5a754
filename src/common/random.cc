#include "common/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace paddock {

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no entropy source: nothing random can be trusted
    }
    got += static_cast<size_t>(n);
  }
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(bytes * 2);
  for (unsigned char v : buf) {
    s += kHex[v >> 4];
    s += kHex[v & 0xf];
  }
  return s;
}

}  // namespace paddock
