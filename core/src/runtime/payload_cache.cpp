#include "payload_cache.h"

#include "gpuos/device/queue.h"

namespace gpuos::runtime {

bool CachedPayloadKey(const device::TaskDesc& task, const device::TensorDesc* tensors,
                      std::uint32_t tensor_count, std::uint32_t tiles, std::string* key) {
  if (task.num_tiles != tiles || tiles > device::kDirectMaxTiles || task.num_tensors == 0 ||
      task.num_tensors > device::kMaxTaskTensors) {
    return false;
  }
  for (unsigned int k = 0; k < task.num_tensors; ++k) {
    if (task.tensors[k] < 0 || static_cast<std::uint32_t>(task.tensors[k]) >= tensor_count) {
      return false;
    }
  }
  device::TaskDesc keyed = task;
  keyed.task_id = 0;
  keyed.successor_begin = 0;
  key->assign(reinterpret_cast<const char*>(&keyed), sizeof(keyed));
  key->append(reinterpret_cast<const char*>(tensors), sizeof(device::TensorDesc) * tensor_count);
  return true;
}

PayloadCache::PayloadCache(unsigned int entries) : entries_(entries) {}

PayloadCache::Decision PayloadCache::Choose(std::string_view key, std::uint64_t sequence,
                                            std::uint32_t first_task_id,
                                            const CompletedFn& completed, const FilledFn& filled) {
  Decision decision;
  if (entries_.empty()) return decision;
  const std::uint64_t hash = std::hash<std::string_view>{}(key);
  ++clock_;
  Entry* victim = nullptr;
  for (unsigned int i = 0; i < entries_.size(); ++i) {
    Entry& entry = entries_[i];
    if (entry.valid && entry.hash == hash && entry.key == key) {
      if (!completed(entry.fill) || !filled(i, entry.fill)) {
        // Its fill still runs (or did not fill it: a fill the device did not
        // open as direct tiles never confirms): publish as before; a fill
        // that never confirmed is replaced once the entry is idle.
        if (Idle(entry, completed)) {
          victim = &entry;
          break;
        }
        return decision;
      }
      Idle(entry, completed);  // prunes what completed: in_flight stays within the ring
      entry.in_flight.push_back(sequence);
      entry.touched = clock_;
      ++uses_;
      decision.kind = Kind::kUse;
      decision.entry = i;
      decision.fill = entry.fill;
      decision.first_task_id = entry.first_task_id;
      return decision;
    }
    const bool idle = !entry.valid || Idle(entry, completed);
    // Free entries first, then the least recently used idle one.
    if (idle && (victim == nullptr ||
                 (victim->valid && (!entry.valid || entry.touched < victim->touched)))) {
      victim = &entry;
    }
  }
  if (victim == nullptr) return decision;
  victim->valid = true;
  victim->key.assign(key.data(), key.size());
  victim->hash = hash;
  victim->fill = sequence;
  victim->in_flight.assign(1, sequence);
  victim->touched = clock_;
  victim->first_task_id = first_task_id;
  ++fills_;
  decision.kind = Kind::kFill;
  decision.entry = static_cast<unsigned int>(victim - entries_.data());
  return decision;
}

bool PayloadCache::Idle(Entry& entry, const CompletedFn& completed) {
  std::erase_if(entry.in_flight, [&](std::uint64_t s) { return completed(s); });
  return entry.in_flight.empty();
}

}  // namespace gpuos::runtime
