// Random identifiers from the kernel's CSPRNG (getrandom).
#pragma once

#include <cstddef>
#include <string>

namespace paddock {

// `bytes` random bytes as lowercase hex (2 * bytes characters). Never fails: getrandom on a
// booted kernel does not block or run short for small requests; it aborts if it ever did.
std::string RandomHex(size_t bytes);

}  // namespace paddock
