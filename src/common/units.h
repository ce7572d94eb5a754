// Parsing of human-written sizes and durations in flags and config ("512M", "2GiB", "30s").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace paddock {

// Bytes with an optional binary suffix: K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (all powers of
// 1024, as memory limits are). "field" names the input in the error message.
Result<uint64_t> ParseSize(std::string_view text, std::string_view field);

// Seconds with an optional unit: ms, s, m, h ("1.5" = 1.5 s).
Result<std::chrono::milliseconds> ParseDuration(std::string_view text, std::string_view field);

}  // namespace paddock
