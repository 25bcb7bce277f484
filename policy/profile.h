// Learned-sizing profiles: the key that names one engine configuration on one device, and the profile's JSON text.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/engine.h"
#include "policy/events.h"

namespace kvremap::policy {

// Bumped whenever a profile's meaning or layout changes; part of the key, so an old profile is never matched.
inline constexpr std::uint32_t kProfileSchemaVersion = 2;
// Larger inputs are not profiles; the reader refuses them before parsing.
inline constexpr std::size_t kMaxProfileBytes = std::size_t{1} << 20;

// What decides a start-up's memory use, as the library sees it at load.
struct ProfileKey {
  std::vector<std::string> argv;  // the engine's command line, as split_cmdline gives it
  std::string device_name;
  std::uint64_t device_total_bytes = 0;
  std::uint32_t rank = 0;  // the rank, or the visible device ordinal where the engine has no rank
  std::int32_t driver_version = 0;
  std::uint32_t schema_version = kProfileSchemaVersion;
  // "NAME=value" of each of the engine's memory_environment_variables (policy/engine.h, from the engine's model) set at the
  // start, in that list's order: another allocator configuration or model runner is another start.
  std::vector<std::string> environment;
  // "LABEL BUILD-ID" of each native module of the engine and PyTorch loaded in the process
  // (engine_module_label in policy/engine.h), sorted: another engine or PyTorch build is another start.
  std::vector<std::string> software;
  // The `--config FILE` the engine reads flags from (policy::config_file) and a hash of its contents
  // ("FILE fnv1a:HEX", or "FILE unreadable"): flags in it change the start as flags on the line do.
  std::string config;
  // What the model is, where its argument names a local directory holding a `config.json`: "config.json
  // fnv1a:HEX" of that file's bytes (model_identity_text). The key then holds this instead of the path, so
  // one model under /models/x on one node and in a Hugging Face cache snapshot on another is one start.
  // Empty: the argument itself (a hub name, or a path without a readable config.json) is the model.
  std::string model_identity;
};

// The model's argument in `argv` (the engine's command line) for the detected engine, as the key reads it
// (vLLM: `serve MODEL` or `--model MODEL`; SGLang: `--model-path`), or nothing. What the library resolves
// to a model identity.
std::optional<std::string> model_argument(std::span<const std::string> argv);

// "config.json fnv1a:HEX" for the bytes of a model directory's config.json.
std::string model_identity_text(std::string_view config_json);

// The flags of `kind` dropped from the key, with how each takes its value: they change where the server
// listens, what it logs, or the share of memory it asks for — a profile stores absolute needs, so another
// share reuses it. Empty for `other`.
std::span<const FlagSpec> flags_ignored_by_profiles(EngineKind kind);

// The command line as the key sees it: secret flags dropped with their values (policy/redact.h, so a key
// never holds a secret), the executable's basename, the ignored flags of the detected engine dropped
// with their values (`--flag v`, `--flag=v`, `--no-flag`; list flags with every value up to
// the next option), and each kept `--flag=v` split into `--flag` `v`, so both spellings match. Order kept.
std::vector<std::string> normalised_cmdline(std::span<const std::string> argv);

// One line naming everything in the key; arguments and the device name quoted where needed, so two
// different keys never give the same text. Stored in the profile and compared on load.
std::string key_text(const ProfileKey& key);

// FNV-1a, 64 bits: stable across builds and machines, unlike std::hash.
std::uint64_t fnv1a_64(std::string_view bytes);

// "<engine>-<16 hex digits of fnv1a_64(key_text)>-rank<r>.json", e.g. "vllm-0123456789abcdef-rank0.json".
std::string profile_file_name(const ProfileKey& key);
// The same from a key's parts as read back: its normalised command line (the engine), its text and its rank.
std::string profile_file_name(std::span<const std::string> argv, std::string_view text, std::uint32_t rank);

// What one category needed after the engine sized its KV cache.
struct PostKvPeak {
  std::uint64_t resident_bytes = 0;   // still held at the commit
  std::uint64_t transient_bytes = 0;  // peak since the KV burst minus resident_bytes
  bool operator==(const PostKvPeak&) const = default;
};

// The memory query the engine sized its KV cache from.
struct SizingQuery {
  std::uint32_t index = 0;              // among the process's memory queries, from 0
  std::string phase;                    // the phase it fell in (to_string(Phase))
  std::uint64_t device_free_bytes = 0;  // what the driver reported
  bool operator==(const SizingQuery&) const = default;
};

// What one start-up measured.
struct Profile {
  std::uint32_t schema_version = kProfileSchemaVersion;
  std::string key;  // key_text() of the configuration
  std::uint64_t kv_requested_bytes = 0;
  std::uint32_t kv_tensors = 0;                      // how many tensors the KV cache had
  std::uint64_t granularity_bytes = 0;               // the device's VMM granularity (KV tensors are multiples of it)
  std::array<PostKvPeak, kCategoryCount> post_kv{};  // indexed by Category
  std::optional<std::uint64_t> serving_peak_bytes;   // known at exit only
  std::int64_t margin_bytes = 0;                     // commit margin; negative: deficit
  std::uint64_t headroom_bytes = 0;
  // The part of headroom_bytes that rested on measurement (policy/serving_headroom.h): less when an
  // engine's estimate raised it before serving was measured. None: all of it (profiles without the field).
  std::optional<std::uint64_t> headroom_measured_bytes;
  // How much less free memory than the driver's figure this start's sizing query reported (negative:
  // more), so the next start moves from where this one stood; 0 when the engine sized it alone.
  std::int64_t sizing_shift_bytes = 0;
  // The share of the device the engine was started with (vLLM --gpu-memory-utilization, its default
  // where not given), which the key leaves out: a start at another share moves by the difference.
  std::optional<double> memory_share;
  std::optional<SizingQuery> sizing_query;  // none when no sizing query was recognised
  std::int64_t measured_at = 0;             // when the commit ran, seconds since the epoch (the caller's clock)
  std::int64_t written_at = 0;              // when this text was written, same clock
  bool operator==(const Profile&) const = default;
};

// The profile as a small JSON object (pretty-printed, '\n'-terminated). Never throws on any field value.
std::string to_json(const Profile& profile);

// A profile read back, or why the text is not a usable one.
struct ProfileRead {
  std::optional<Profile> profile;
  std::string problem;  // one line when profile is empty: "not JSON: ...", "schema version 2, expected 1", ...
};

// Room the bounds below leave for what a profile does not record: allocations between the sizing query
// and the KV burst, the scratch, an engine's rounding and run-to-run noise: 1 GiB, or a sixteenth of the
// device where that is more.
std::uint64_t profile_bounds_slack(std::uint64_t device_total);

// Why `profile` cannot describe a start on a device of `device_total` bytes (the key's total memory):
// one line naming every field out of range and what range was expected, or nothing. A profile that
// reads back whole can still hold figures no start measured (written by hand, or by a bug); sizing from
// them would take the engine's KV cache away, or give it more than the device has. The bounds follow
// from what the commit measures (docs/kv-deferral.md, Profile trust):
// - every byte figure (the shift and margin in absolute value, the headroom, the serving peak, the
//   sizing query's free memory, each post-KV figure) is at most the device's total memory;
// - the free memory at the commit, margin + headroom + KV requested, lies between 0 (less the KV's
//   rounding to whole granules) and the device's total;
// - a deficit (-margin) is at most what the engine could have lacked: the headroom, what post-KV
//   work kept resident, what a negative shift added, and profile_bounds_slack();
// - the share (vLLM's --gpu-memory-utilization) is what the engine sized its KV cache within: the
//   share of the device is at least the KV requested plus the shift.
std::optional<std::string> profile_out_of_bounds(const Profile& profile, std::uint64_t device_total);

// Reads `text` as a profile written for `expected_key` (a key_text()). Refuses, with one line naming what
// was wrong: more than kMaxProfileBytes, nesting deeper than a profile has, not JSON, not an object, not a
// kvremap profile, another schema version, another key, a missing field or one of the wrong type or range.
// Never throws.
ProfileRead read_profile(std::string_view text, std::string_view expected_key);
// The same checks for a profile of whatever configuration its key names (the `kvremap profile` tool's
// reading: it then checks the key against the file's name, policy/profile_key_parts.h).
ProfileRead read_profile_of_any_key(std::string_view text);

}  // namespace kvremap::policy
