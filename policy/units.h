// Parsers for human-written sizes ("512MiB", "1.5G") and fractions ("0.02", "2%") used by every option table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvremap::policy {

// Bytes from "123", "4096B", "64KiB", "512MiB", "2GiB", "1.5G", "1T". K/M/G/T with or without "iB"
// are binary (1024-based): GPU memory is always reported in binary units. Case-insensitive suffix.
std::optional<std::uint64_t> parse_size(std::string_view text);

// A fraction in [0, 1] from "0.02" or "2%".
std::optional<double> parse_fraction(std::string_view text);

// Booleans: 1/0, true/false, yes/no, on/off (case-insensitive).
std::optional<bool> parse_bool(std::string_view text);

// A non-negative integer that fits in 64 bits.
std::optional<std::uint64_t> parse_count(std::string_view text);

// "1.50 GiB", "512.00 MiB", "4096 B": for logs and messages.
std::string format_bytes(std::uint64_t bytes);
// The same for a difference: "-1.50 GiB" below zero, as format_bytes otherwise (no sign).
std::string format_bytes_signed(std::int64_t bytes);

// What parse_size accepts, for one-line error messages.
inline constexpr std::string_view kSizeSyntax = "a size such as 4096, 64KiB, 512MiB, 1.5G or 2GiB";
inline constexpr std::string_view kFractionSyntax = "a fraction such as 0.02 or 2%";
inline constexpr std::string_view kBoolSyntax = "1/0, true/false, yes/no or on/off";

}  // namespace kvremap::policy
