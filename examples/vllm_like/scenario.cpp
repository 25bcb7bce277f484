// Scenario JSON parsing and validation (nlohmann-json); the format is documented in README.md.
#include "scenario.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <utility>

namespace vllm_like {

namespace {

using nlohmann::json;

std::uint64_t size_of(const json& value, const std::string& field) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_string()) {
    try {
      return parse_size(value.get<std::string>());
    } catch (const ScenarioError& e) {
      throw ScenarioError(field + ": " + e.what());
    }
  }
  throw ScenarioError(field + ": expected a size string such as \"48GiB\" or an integer byte count");
}

const json& member(const json& object, const char* key, const std::string& where) {
  if (!object.is_object() || !object.contains(key)) throw ScenarioError(where + ": missing \"" + key + "\"");
  return object.at(key);
}

std::size_t count_of(const json& value, const std::string& field, std::size_t minimum) {
  if (!value.is_number_unsigned() || value.get<std::uint64_t>() < minimum)
    throw ScenarioError(field + ": expected an integer >= " + std::to_string(minimum));
  return value.get<std::size_t>();
}

std::vector<TensorSpec> tensors_of(const json& list, const std::string& field) {
  if (!list.is_array()) throw ScenarioError(field + ": expected a list of {\"name\", \"size\", \"count\"}");
  std::vector<TensorSpec> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = field + "[" + std::to_string(i) + "]";
    TensorSpec t;
    t.name = member(list[i], "name", where).get<std::string>();
    t.bytes = size_of(member(list[i], "size", where), where + ".size");
    if (t.bytes == 0) throw ScenarioError(where + ".size: must not be 0");
    if (list[i].contains("count")) t.count = count_of(list[i].at("count"), where + ".count", 1);
    out.push_back(std::move(t));
  }
  return out;
}

Scenario parse(const json& j) {
  Scenario s;
  s.name = j.value("name", std::string("unnamed"));
  const json& device = member(j, "device", "scenario");
  s.device_total = size_of(member(device, "total", "device"), "device.total");
  s.context_bytes = size_of(member(device, "context", "device"), "device.context");

  const json& weights = member(j, "weights", "scenario");
  s.num_layers = count_of(member(j, "num_layers", "scenario"), "num_layers", 1);
  if (weights.contains("global_tensors"))
    s.global_tensors = tensors_of(weights.at("global_tensors"), "weights.global_tensors");
  s.per_layer_tensors = tensors_of(member(weights, "per_layer_tensors", "weights"), "weights.per_layer_tensors");

  const json& profiling = member(j, "profiling", "scenario");
  s.activation_peak = size_of(member(profiling, "activation_peak", "profiling"), "profiling.activation_peak");
  if (profiling.contains("activation_tensors"))
    s.activation_tensors = count_of(profiling.at("activation_tensors"), "profiling.activation_tensors", 1);
  s.non_torch_growth = size_of(member(profiling, "non_torch_growth", "profiling"), "profiling.non_torch_growth");
  if (profiling.contains("estimate_graph_memory")) {
    if (!profiling.at("estimate_graph_memory").is_boolean())
      throw ScenarioError("profiling.estimate_graph_memory: expected true or false");
    s.estimate_graph_memory = profiling.at("estimate_graph_memory").get<bool>();
  }
  if (profiling.contains("estimate_graph_sizes"))
    s.estimate_graph_sizes = count_of(profiling.at("estimate_graph_sizes"), "profiling.estimate_graph_sizes", 1);
  if (profiling.contains("graph_profiling_kv_per_layer"))
    s.graph_profiling_kv_per_layer =
        size_of(profiling.at("graph_profiling_kv_per_layer"), "profiling.graph_profiling_kv_per_layer");

  if (j.contains("kv_cache") && j.at("kv_cache").contains("persistent_buffers"))
    s.persistent_buffers = tensors_of(j.at("kv_cache").at("persistent_buffers"), "kv_cache.persistent_buffers");

  const json& autotune = member(j, "autotune", "scenario");
  s.autotune_peak = size_of(member(autotune, "peak", "autotune"), "autotune.peak");
  s.autotune_resident = size_of(member(autotune, "resident", "autotune"), "autotune.resident");
  if (s.autotune_resident > s.autotune_peak) throw ScenarioError("autotune.resident: larger than autotune.peak");
  if (autotune.contains("transient_buffers"))
    s.autotune_transient_buffers = count_of(autotune.at("transient_buffers"), "autotune.transient_buffers", 1);

  const json& modules = member(j, "modules", "scenario");
  s.module_count = count_of(member(modules, "count", "modules"), "modules.count", 0);
  s.module_total = size_of(member(modules, "total", "modules"), "modules.total");

  const json& capture = member(j, "graph_capture", "scenario");
  const json& sizes = member(capture, "sizes", "graph_capture");
  if (!sizes.is_array() || sizes.empty())
    throw ScenarioError("graph_capture.sizes: expected a non-empty list of batch sizes");
  for (std::size_t i = 0; i < sizes.size(); ++i)
    s.capture_sizes.push_back(count_of(sizes[i], "graph_capture.sizes[" + std::to_string(i) + "]", 1));
  if (capture.contains("warmups")) s.capture_warmups = count_of(capture.at("warmups"), "graph_capture.warmups", 0);
  s.capture_intermediate_per_token =
      size_of(member(capture, "intermediate_per_token", "graph_capture"), "graph_capture.intermediate_per_token");
  s.capture_output_per_token =
      size_of(member(capture, "output_per_token", "graph_capture"), "graph_capture.output_per_token");
  s.graph_exec_total = size_of(member(capture, "exec_total", "graph_capture"), "graph_capture.exec_total");

  if (j.contains("serving") && j.at("serving").contains("steps"))
    s.serving_steps = count_of(j.at("serving").at("steps"), "serving.steps", 1);
  s.serving_activation_peak = s.activation_peak;
  if (j.contains("serving") && j.at("serving").contains("activation_peak"))
    s.serving_activation_peak = size_of(j.at("serving").at("activation_peak"), "serving.activation_peak");
  s.first_prompt_activation_peak = s.serving_activation_peak;
  if (j.contains("serving") && j.at("serving").contains("first_prompt_activation_peak"))
    s.first_prompt_activation_peak =
        size_of(j.at("serving").at("first_prompt_activation_peak"), "serving.first_prompt_activation_peak");
  return s;
}

}  // namespace

std::uint64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw ScenarioError("'" + text + "' is not a size such as \"48GiB\", \"0.5GiB\" or \"256MiB\"");
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  if (unit == "B" || unit.empty())
    scale = 1;
  else if (unit == "KiB")
    scale = 1024.0;
  else if (unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "TiB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  if (scale == 0 || !(value >= 0) || value * scale > 9.0e18)
    throw ScenarioError("'" + text +
                        "' is not a size such as \"48GiB\", \"0.5GiB\" or \"256MiB\" (units: B, KiB, MiB, GiB, TiB)");
  return static_cast<std::uint64_t>(std::llround(value * scale));
}

Scenario load_scenario(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ScenarioError(path + ": cannot be read");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw ScenarioError(path + ": not valid JSON: " + e.what());
  }
  try {
    return parse(j);
  } catch (const ScenarioError& e) {
    throw ScenarioError(path + ": " + e.what());
  } catch (const json::exception& e) {
    throw ScenarioError(path + ": " + e.what());
  }
}

}  // namespace vllm_like
