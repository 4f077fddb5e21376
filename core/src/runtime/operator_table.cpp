#include "operator_table.h"

#include <algorithm>
#include <set>

#include "gpuos/device/queue.h"

namespace gpuos::runtime {
namespace {

std::string TensorsText(const std::vector<registry::TensorParam>& tensors) {
  std::string text;
  for (const registry::TensorParam& t : tensors) {
    text += t.name + ":";
    text +=
        t.dtype ? DTypeName(*t.dtype) : (t.type_variable == registry::TypeVariable::kU ? "U" : "T");
    text += ",";
  }
  return text;
}

std::string KeyText(const std::string& op, int dtype, int out_dtype) {
  std::string text = op + " " + DTypeName(static_cast<DType>(dtype));
  if (out_dtype >= 0) text += std::string("->") + DTypeName(static_cast<DType>(out_dtype));
  return text;
}

}  // namespace

std::string OperatorInterface(const registry::OperatorSpec& spec) {
  std::string text = std::string(registry::OperatorKindName(spec.kind)) +
                     "|in=" + TensorsText(spec.inputs) + "|out=" + TensorsText(spec.outputs) +
                     "|attr=";
  for (const registry::AttributeParam& a : spec.attributes) {
    text += a.name + ":" + registry::AttributeTypeName(a.type) + "=" +
            a.default_value.value_or("<required>") + ",";
  }
  return text;
}

Status OperatorTable::Bind(Tables& tables, const Key& key, const registry::SemVer& version) {
  const auto& by_version = tables.candidates.at(key);
  const Candidate& chosen = by_version.at(version);
  const std::string interface = OperatorInterface(*chosen.spec);
  auto live = tables.id_by_key.find(key);
  std::uint32_t id = 0;
  if (live != tables.id_by_key.end() && tables.interfaces[live->second - 1] == interface) {
    id = live->second;
  } else {
    if (live != tables.id_by_key.end()) tables.refs[live->second - 1].slot = 0;  // stale now
    if (tables.refs.size() + 1 >= device::kMaxLogicalOps) {
      return FailedPrecondition("the runtime ran out of logical operator ids (" +
                                std::to_string(device::kMaxLogicalOps - 1) +
                                "): too many interface changes; restart the runtime");
    }
    id = static_cast<std::uint32_t>(tables.refs.size() + 1);
    tables.refs.emplace_back();
    tables.interfaces.push_back(interface);
    tables.id_by_key[key] = id;
  }
  OperatorRef& ref = tables.refs[id - 1];
  ref.name = std::get<0>(key);
  ref.dtype = static_cast<DType>(std::get<1>(key));
  ref.out_dtype = std::get<2>(key) < 0 ? std::nullopt
                                       : std::optional<DType>(static_cast<DType>(std::get<2>(key)));
  ref.version = version;
  ref.slot = chosen.slot;
  ref.logical = id;
  ref.spec = chosen.spec;
  return Status::Ok();
}

Status OperatorTable::Load(const registry::KernelImage& image,
                           const std::vector<const registry::OperatorSpec*>& specs,
                           const std::map<std::string, registry::SemVer>& active) {
  Tables next = t_;
  next.candidates.clear();
  for (const registry::ImageEntry& entry : image.entries) {
    const registry::OperatorSpec* spec = nullptr;
    for (const registry::OperatorSpec* s : specs) {
      if (s->name == entry.op_name && s->version == entry.version) spec = s;
    }
    if (spec == nullptr) {
      return Internal("image entry " + entry.symbol + " (" + entry.op_name + " " +
                      entry.version.ToString() + ") has no operator spec");
    }
    const Key key{entry.op_name, static_cast<int>(entry.dtype),
                  entry.out_dtype ? static_cast<int>(*entry.out_dtype) : -1};
    next.candidates[key][entry.version] = Candidate{entry.slot, spec};
  }
  // Keys that left the image stop resolving.
  for (auto& [key, id] : next.id_by_key) {
    if (next.candidates.count(key) == 0) next.refs[id - 1].slot = 0;
  }
  for (const auto& [key, by_version] : next.candidates) {
    auto wanted = active.find(std::get<0>(key));
    const registry::SemVer version = wanted != active.end() && by_version.count(wanted->second)
                                         ? wanted->second
                                         : by_version.rbegin()->first;
    GPUOS_RETURN_IF_ERROR(Bind(next, key, version));
  }
  next.requested = active;
  t_ = std::move(next);
  return Status::Ok();
}

Expected<bool> OperatorTable::Activate(const std::string& op, const registry::SemVer& version) {
  Tables next = t_;
  bool found = false;
  bool has_version = false;
  bool changed = false;
  std::set<registry::SemVer> present;
  for (const auto& [key, by_version] : next.candidates) {
    if (std::get<0>(key) != op) continue;
    found = true;
    for (const auto& [have, c] : by_version) present.insert(have);
    if (by_version.count(version) == 0) continue;  // this dtype keeps its version
    has_version = true;
    const std::uint32_t before = next.id_by_key.at(key);
    const std::uint32_t slot_before = next.refs[before - 1].slot;
    GPUOS_RETURN_IF_ERROR(Bind(next, key, version));
    const std::uint32_t after = next.id_by_key.at(key);
    changed = changed || after != before || next.refs[after - 1].slot != slot_before;
  }
  if (!found) return NotFound("operator '" + op + "' is not in the active kernel image");
  if (!has_version) {
    std::string versions;
    for (const auto& v : present) versions += (versions.empty() ? "" : ", ") + v.ToString();
    return FailedPrecondition("operator '" + op + "' version " + version.ToString() +
                              " is not in the active image (it has " + versions +
                              "); an epoch switch to a new image is needed");
  }
  next.requested[op] = version;
  t_ = std::move(next);
  return changed;
}

Expected<OperatorRef> OperatorTable::Resolve(const std::string& op, DType dtype,
                                             std::optional<DType> out_dtype) const {
  const Key key{op, static_cast<int>(dtype), out_dtype ? static_cast<int>(*out_dtype) : -1};
  auto it = t_.id_by_key.find(key);
  if (it != t_.id_by_key.end() && t_.refs[it->second - 1].slot != 0) {
    return t_.refs[it->second - 1];
  }
  std::string dtypes;
  for (const auto& [have, by_version] : t_.candidates) {
    if (std::get<0>(have) != op) continue;
    dtypes += (dtypes.empty() ? "" : ", ") +
              KeyText(op, std::get<1>(have), std::get<2>(have)).substr(op.size() + 1);
  }
  const std::string wanted = KeyText(op, std::get<1>(key), std::get<2>(key));
  if (!dtypes.empty()) {
    return NotFound("operator '" + op + "' has no " + wanted.substr(op.size() + 1) +
                    " instantiation in the kernel image (it has: " + dtypes + ")");
  }
  return NotFound("operator '" + op + "' is not in the kernel image (" +
                  std::to_string(t_.candidates.size()) +
                  " instantiations); publish a pack that defines it");
}

const OperatorRef* OperatorTable::ByLogical(std::uint32_t logical) const {
  if (logical == 0 || logical > t_.refs.size()) return nullptr;
  return &t_.refs[logical - 1];
}

std::vector<unsigned int> OperatorTable::AliasTable() const {
  std::vector<unsigned int> table(device::kMaxLogicalOps, 0);
  for (const OperatorRef& ref : t_.refs) table[ref.logical] = ref.slot;
  return table;
}

std::map<std::string, registry::SemVer> OperatorTable::ActiveVersions() const {
  std::map<std::string, registry::SemVer> versions;
  for (const auto& [key, id] : t_.id_by_key) {
    const OperatorRef& ref = t_.refs[id - 1];
    if (ref.slot == 0) continue;
    auto it = versions.find(ref.name);
    if (it == versions.end() || it->second < ref.version) versions[ref.name] = ref.version;
  }
  for (auto& [name, version] : versions) {
    auto asked = t_.requested.find(name);
    if (asked != t_.requested.end() && HasVersion(name, asked->second)) version = asked->second;
  }
  return versions;
}

std::vector<registry::SemVer> OperatorTable::VersionsInImage(const std::string& op) const {
  std::vector<registry::SemVer> versions;
  for (const auto& [key, by_version] : t_.candidates) {
    if (std::get<0>(key) != op) continue;
    for (const auto& [version, c] : by_version) {
      if (std::find(versions.begin(), versions.end(), version) == versions.end()) {
        versions.push_back(version);
      }
    }
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

bool OperatorTable::HasVersion(const std::string& op, const registry::SemVer& version) const {
  for (const auto& [key, by_version] : t_.candidates) {
    if (std::get<0>(key) == op && by_version.count(version) != 0) return true;
  }
  return false;
}

std::string OperatorTable::Unresolvable(std::uint32_t logical) const {
  const OperatorRef* ref = ByLogical(logical);
  if (ref == nullptr) return "logical operator id " + std::to_string(logical) + " is unknown";
  const std::string what =
      "'" + ref->name + "' " + DTypeName(ref->dtype) + " (version " + ref->version.ToString() + ")";
  const Key key{ref->name, static_cast<int>(ref->dtype),
                ref->out_dtype ? static_cast<int>(*ref->out_dtype) : -1};
  if (t_.candidates.count(key) == 0) {
    return "the task graph uses operator " + what + ", which the active kernel image no longer has";
  }
  return "the task graph was built against operator " + what +
         ", whose interface (tensors or attributes) differs from the active version " +
         t_.refs[t_.id_by_key.at(key) - 1].version.ToString() + "; build the graph again";
}

}  // namespace gpuos::runtime
