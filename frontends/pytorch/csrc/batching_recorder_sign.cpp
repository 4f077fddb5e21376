// SequenceRecorder: which ops are recordable, and their signatures (trie
// edge keys) (batching_recorder.h).
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "batching_recorder.h"
#include "batching_recorder_internal.h"

namespace gpuos_torch {
namespace {

std::mutex g_recordable_mutex;
std::shared_ptr<const std::unordered_set<std::string>> g_recordable =
    std::make_shared<std::unordered_set<std::string>>();
std::atomic<int64_t> g_recordable_generation{0};

// Signature tags (batching_recorder.h: "each tensor argument as ...").
enum Tag : int64_t {
  kNone = 1,
  kProducedTensor,
  kExternalTensor,
  kWrappedNumber,
  kInt,
  kDouble,
  kBool,
  kString,
  kList,
  kDevice,
};

int64_t DoubleBits(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
bool SameLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.storage_offset() == b.storage_offset() &&
         a.sizes() == b.sizes() && a.strides() == b.strides();
}

}  // namespace

void SetRecordableOps(const std::vector<std::string>& names) {
  auto set = std::make_shared<std::unordered_set<std::string>>(names.begin(), names.end());
  std::lock_guard<std::mutex> lock(g_recordable_mutex);
  g_recordable = std::move(set);
  ++g_recordable_generation;
}

const SequenceRecorder::OpInfo& SequenceRecorder::InfoOf(const c10::OperatorHandle& op) {
  const int64_t generation = g_recordable_generation.load();
  if (generation != infos_generation_) {
    infos_.clear();
    infos_generation_ = generation;
  }
  const c10::OperatorName& name = op.operator_name();
  auto it = infos_.find(&name);
  if (it != infos_.end() && it->second->name == name) return *it->second;
  auto info = std::make_unique<OpInfo>();
  info->name = name;
  info->qualified = c10::toString(name);
  std::shared_ptr<const std::unordered_set<std::string>> recordable;
  {
    std::lock_guard<std::mutex> lock(g_recordable_mutex);
    recordable = g_recordable;
  }
  const c10::FunctionSchema& schema = op.schema();
  info->num_arguments = static_cast<int>(schema.arguments().size());
  info->num_returns = static_cast<int>(schema.returns().size());
  if (recordable->count(info->qualified) == 0) {
    info->why = "not in gpuos.coverage()";
  }
  for (std::size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::Argument& argument = schema.arguments()[i];
    if (argument.alias_info() != nullptr && argument.alias_info()->isWrite()) {
      info->why = "writes to its argument '" + argument.name() +
                  "' (in-place and out= ops are not recorded)";
    }
    if (argument.name() == "device") info->device_argument = static_cast<int>(i);
  }
  for (const c10::Argument& result : schema.returns()) {
    if (result.alias_info() != nullptr) info->view_schema = true;
  }
  OpInfo& stored = *info;
  infos_[&name] = std::move(info);
  return stored;
}

void SequenceRecorder::NoteFallback(const OpInfo& info, const std::string& why) {
  ++stats_.fallbacks[info.qualified];
  stats_.fallback_reasons.emplace(info.qualified, why);
  flush_op_ = &info.qualified;
}

const SequenceRecorder::Produced* SequenceRecorder::FindProduced(const at::Tensor& t,
                                                                 int before_step) const {
  auto range = produced_.equal_range(t.storage().unsafeGetStorageImpl());
  const Produced* same_layout = nullptr;
  for (auto it = range.first; it != range.second; ++it) {
    const Produced& p = it->second;
    if (p.step >= before_step) continue;
    if (p.impl == t.unsafeGetTensorImpl()) return &p;
    if (same_layout == nullptr && SameLayout(t, steps_[p.step].outputs[p.output])) {
      same_layout = &p;
    }
  }
  return same_layout;
}

bool SequenceRecorder::SignTensor(const at::Tensor& t, std::string* why) {
  if (!t.defined()) {
    signature_.push_back(kNone);
    return true;
  }
  if (t.unsafeGetTensorImpl()
          ->is_wrapped_number()) {  // a Python number the arg parser wrapped (x * 0.5)
    signature_.push_back(kWrappedNumber);
    signature_.push_back(static_cast<int64_t>(t.scalar_type()));
    switch (t.scalar_type()) {
      case c10::ScalarType::Double:
        signature_.push_back(DoubleBits(*t.const_data_ptr<double>()));
        return true;
      case c10::ScalarType::Long:
        signature_.push_back(*t.const_data_ptr<int64_t>());
        return true;
      case c10::ScalarType::Bool:
        signature_.push_back(*t.const_data_ptr<bool>() ? 1 : 0);
        return true;
      default:
        *why = "a complex Python number";
        return false;
    }
  }
  if (t.layout() != c10::kStrided || !t.has_storage() || t.is_neg() || t.is_conj()) {
    *why = "a tensor that is not plain strided (sparse, conjugate or negative view, no storage)";
    return false;
  }
  if (t.key_set().has(c10::DispatchKey::Python)) {
    *why = "a tensor subclass or a Python dispatch mode";
    return false;
  }
  const c10::Device device = t.device();
  if (device.type() != device_type_) {
    *why = std::string("a tensor on ") + device.str() + ", the executor runs on " +
           c10::DeviceTypeName(device_type_, /*lower_case=*/true);
    return false;
  }
  if (op_device_index_ == -2) {
    op_device_index_ = device.index();
  } else if (op_device_index_ != device.index()) {
    *why = "tensors on several devices";
    return false;
  }
  if (t.requires_grad() && c10::GradMode::is_enabled()) {
    *why = "autograd: a tensor requires grad and grad mode is on";
    return false;
  }
  if (const Produced* p = FindProduced(t)) {
    signature_.insert(signature_.end(), {kProducedTensor, p->step, p->output});
    return true;
  }
  if (produced_.count(t.storage().unsafeGetStorageImpl()) > 0) {
    *why = "a view of a pending result that was not made by a recorded op";
    return false;
  }
  int index = -1;
  auto found = external_index_.find(t.unsafeGetTensorImpl());
  if (found != external_index_.end()) {
    index = found->second;
  } else {
    for (std::size_t i = 0; i < new_externals_.size(); ++i) {
      if (new_externals_[i].unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        index = static_cast<int>(externals_.size() + i);
      }
    }
    if (index < 0) {
      index = static_cast<int>(externals_.size() + new_externals_.size());
      new_externals_.push_back(t);
    }
  }
  signature_.insert(signature_.end(),
                    {kExternalTensor, index, static_cast<int64_t>(t.scalar_type()), device.index(),
                     t.storage_offset(), t.dim()});
  signature_.insert(signature_.end(), t.sizes().begin(), t.sizes().end());
  signature_.insert(signature_.end(), t.strides().begin(), t.strides().end());
  return true;
}

bool SequenceRecorder::SignValue(const c10::IValue& v, std::string* why) {
  if (v.isNone()) {
    signature_.push_back(kNone);
  } else if (v.isTensor()) {
    return SignTensor(v.toTensor(), why);
  } else if (v.isInt()) {
    signature_.insert(signature_.end(), {kInt, v.toInt()});
  } else if (v.isDouble()) {
    signature_.insert(signature_.end(), {kDouble, DoubleBits(v.toDouble())});
  } else if (v.isBool()) {
    signature_.insert(signature_.end(), {kBool, v.toBool() ? 1 : 0});
  } else if (v.isString()) {
    const std::string& s = v.toStringRef();
    signature_.insert(signature_.end(), {kString, static_cast<int64_t>(s.size())});
    for (char c : s) signature_.push_back(c);
  } else if (v.isDevice()) {
    const c10::Device d = v.toDevice();
    signature_.insert(signature_.end(), {kDevice, static_cast<int64_t>(d.type()), d.index()});
  } else if (v.isList()) {
    const auto list = v.toListRef();
    signature_.insert(signature_.end(), {kList, static_cast<int64_t>(list.size())});
    for (const c10::IValue& element : list) {
      if (!SignValue(element, why)) return false;
    }
  } else {
    *why = std::string("an argument of type ") + v.tagKind();
    return false;
  }
  return true;
}

bool SequenceRecorder::Sign(const OpInfo& info, const torch::jit::Stack& stack, std::string* why) {
  signature_.clear();
  new_externals_.clear();
  op_device_index_ = -2;
  const std::size_t first = stack.size() - info.num_arguments;
  for (std::size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (static_cast<int>(i - first) == info.device_argument && v.isDevice()) {
      const c10::Device d = v.toDevice();
      if (d.type() != device_type_ || (op_device_index_ != -2 && op_device_index_ != d.index())) {
        *why = std::string("its result goes to ") + d.str();
        return false;
      }
    }
    if (!SignValue(v, why)) return false;
  }
  if (op_device_index_ == -2) {  // no tensor argument (a factory): where does it go?
    const bool default_device =
        info.device_argument < 0 || stack[first + info.device_argument].isNone();
    if (default_device && device_type_ != c10::DeviceType::CPU) {
      *why = "a factory op without a device argument on the executor's device";
      return false;
    }
  }
  return true;
}

SequenceRecorder::Edge* SequenceRecorder::FindEdge(Node* node,
                                                   const c10::OperatorHandle& op) const {
  for (const auto& edge : node->edges) {
    if (edge->op == op && edge->signature == signature_) return edge.get();
  }
  return nullptr;
}

}  // namespace gpuos_torch
