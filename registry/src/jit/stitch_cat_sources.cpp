// ReadThroughCat (stitch_internal.h): an attention stage's keys or values
// read from the inputs of the cat that wrote them.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stitch_internal.h"

namespace gpuos::registry::jit {
namespace {

// Elements of the cat's output that are mapped one by one; a larger cat is
// not read through.
constexpr long long kMaxMappedElements = 1 << 20;

// The tensors task `t` writes: its last op->outputs.size() tensors.
std::vector<const StitchView*> Outputs(const StitchTask& t) {
  std::vector<const StitchView*> out;
  const std::size_t n = t.op == nullptr ? t.tensors.size() : t.op->outputs.size();
  for (std::size_t k = t.tensors.size() - std::min(n, t.tensors.size()); k < t.tensors.size();
       ++k) {
    out.push_back(&t.tensors[k]);
  }
  return out;
}

// The elements [low, high] of a buffer that a view may touch (the
// program's intermediates share one workspace buffer: ranges, not buffers).
struct Span {
  std::uint32_t buffer = 0;
  long long low = 0, high = 0;
  bool Meets(const Span& o) const { return buffer == o.buffer && low <= o.high && o.low <= high; }
};
Span SpanOf(std::uint32_t buffer, long long offset, const long long* sizes,
            const long long* strides, std::size_t rank) {
  const ElementBounds bounds = BoundsOf(offset, sizes, strides, rank);
  return Span{buffer, bounds.low, bounds.high};
}
Span SpanOf(const StitchView& v) {
  return SpanOf(v.buffer, v.offset, v.sizes.data(), v.strides.data(), v.sizes.size());
}

bool Writes(const StitchTask& t, const Span& span) {
  for (const StitchView* v : Outputs(t)) {
    if (SpanOf(*v).Meets(span)) return true;
  }
  return false;
}

// The element offsets of `v` (any rank), with each element's index along
// `axis` and its offset in `v` order (last dimension fastest).
template <class Visit>
void ForEachElement(const StitchView& v, Visit&& visit) {
  const std::size_t rank = v.sizes.size();
  std::vector<long long> index(rank, 0);
  long long count = 1;
  for (long long s : v.sizes) count *= s;
  for (long long e = 0; e < count; ++e) {
    long long offset = v.offset;
    for (std::size_t d = 0; d < rank; ++d) offset += index[d] * v.strides[d];
    visit(index, offset);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < v.sizes[d]) break;
      index[d] = 0;
    }
  }
}

// Where an element of the cat's output comes from.
struct Source {
  std::uint32_t input = 0;  // the cat's input
  long long offset = 0;     // in that input's buffer
};

}  // namespace

std::optional<CatSources> ReadThroughCat(const StitchDesc& desc, std::size_t consumer,
                                         const Strided3& operand, const long long sizes[3],
                                         int key_axis) {
  // The last task before `consumer` that writes what the operand reads
  // must be a cat whose output does not overlap its inputs, and nothing
  // after it writes the operand's elements or the cat's inputs.
  const long long strides[3] = {operand.s0, operand.s1, operand.s2};
  const Span read = SpanOf(operand.buffer, operand.offset, sizes, strides, 3);
  std::size_t writer = consumer;
  for (std::size_t t = consumer; t-- > 0;) {
    if (Writes(desc.tasks[t], read)) {
      writer = t;
      break;
    }
  }
  if (writer == consumer) return std::nullopt;
  const StitchTask& cat = desc.tasks[writer];
  if (cat.op == nullptr || cat.op->name != "cat" || cat.tensors.size() < 3 ||
      !SpanOf(cat.tensors.back()).Meets(read)) {
    return std::nullopt;
  }
  const std::size_t inputs = cat.tensors.size() - 1;
  for (std::size_t k = 0; k < inputs; ++k) {
    // A cat over its own input: that input no longer holds what it copied.
    if (SpanOf(cat.tensors[k]).Meets(SpanOf(cat.tensors.back()))) return std::nullopt;
  }
  for (std::size_t t = writer + 1; t < consumer; ++t) {
    for (std::size_t k = 0; k < inputs; ++k) {
      if (Writes(desc.tasks[t], SpanOf(cat.tensors[k]))) return std::nullopt;
    }
  }
  const StitchView& out = cat.tensors.back();
  const long long rank = static_cast<long long>(out.sizes.size());
  long long dim = 0;
  for (const auto& [name, value] : cat.attributes) {
    // Canonical text (AddCat parsed it already); anything else: no read-through.
    if (name == "dim" &&
        std::from_chars(value.data(), value.data() + value.size(), dim).ec != std::errc()) {
      return std::nullopt;
    }
  }
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return std::nullopt;
  long long elements = 1;
  for (long long s : out.sizes) elements *= s;
  if (elements > kMaxMappedElements) return std::nullopt;

  // Offset in the output's buffer -> where the cat copied it from.
  std::unordered_map<long long, Source> sources;
  sources.reserve(static_cast<std::size_t>(elements));
  long long start = 0;
  for (std::size_t k = 0; k < inputs; ++k) {
    const StitchView& in = cat.tensors[k];
    if (static_cast<long long>(in.sizes.size()) != rank || in.dtype != out.dtype) {
      return std::nullopt;
    }
    bool unique = true;
    ForEachElement(in, [&](const std::vector<long long>& index, long long in_offset) {
      long long at = out.offset;
      for (long long d = 0; d < rank; ++d) {
        at += (index[d] + (d == dim ? start : 0)) * out.strides[d];
      }
      unique &= sources.emplace(at, Source{static_cast<std::uint32_t>(k), in_offset}).second;
    });
    if (!unique) return std::nullopt;  // the output's view overlaps itself
    start += in.sizes[dim];
  }

  // The operand's element (i, j, k) -> its source; the key index is the
  // `key_axis` one. Every key's elements must come from one input, the
  // keys of an input contiguous, at most two runs.
  const auto source_of = [&](long long i, long long j, long long k) -> std::optional<Source> {
    const long long at = operand.offset + i * operand.s0 + j * operand.s1 + k * operand.s2;
    const auto found = sources.find(at);
    if (found == sources.end()) return std::nullopt;
    return found->second;
  };
  const auto element = [&](long long key, long long a, long long b, long long e[3]) {
    // a, b: the two other axes in order.
    int other = 0;
    for (int axis = 0; axis < 3; ++axis) e[axis] = axis == key_axis ? key : (other++ == 0 ? a : b);
  };
  int other_axes[2];
  for (int axis = 0, n = 0; axis < 3; ++axis) {
    if (axis != key_axis) other_axes[n++] = axis;
  }
  const long long keys = sizes[key_axis];
  std::vector<std::uint32_t> input_of_key(static_cast<std::size_t>(keys));
  for (long long key = 0; key < keys; ++key) {
    long long e[3];
    element(key, 0, 0, e);
    const auto s = source_of(e[0], e[1], e[2]);
    if (!s) return std::nullopt;
    input_of_key[static_cast<std::size_t>(key)] = s->input;
  }
  CatSources result;
  result.split = keys;
  for (long long key = 1; key < keys; ++key) {
    if (input_of_key[static_cast<std::size_t>(key)] ==
        input_of_key[static_cast<std::size_t>(key - 1)]) {
      continue;
    }
    if (result.split != keys) return std::nullopt;  // a third run
    result.split = key;
  }
  // Each run as a strided view of its input, checked element by element.
  for (int part = 0; part < (result.split < keys ? 2 : 1); ++part) {
    const long long first = part == 0 ? 0 : result.split;
    const long long last = part == 0 ? result.split : keys;
    long long base_e[3];
    element(first, 0, 0, base_e);
    const auto base = source_of(base_e[0], base_e[1], base_e[2]);
    if (!base) return std::nullopt;
    Strided3 view;
    view.buffer = cat.tensors[base->input].buffer;
    view.offset = base->offset;
    long long* view_strides[3] = {&view.s0, &view.s1, &view.s2};
    for (int axis = 0; axis < 3; ++axis) {
      const long long extent = axis == key_axis ? last - first : sizes[axis];
      if (extent < 2) continue;  // stride 0: never stepped
      long long e[3] = {base_e[0], base_e[1], base_e[2]};
      ++e[axis];
      const auto next = source_of(e[0], e[1], e[2]);
      if (!next || next->input != base->input) return std::nullopt;
      *view_strides[axis] = next->offset - base->offset;
    }
    for (long long key = first; key < last; ++key) {
      for (long long a = 0; a < sizes[other_axes[0]]; ++a) {
        for (long long b = 0; b < sizes[other_axes[1]]; ++b) {
          long long e[3];
          element(key, a, b, e);
          const auto s = source_of(e[0], e[1], e[2]);
          long long rel[3] = {e[0], e[1], e[2]};
          rel[key_axis] -= first;
          if (!s || s->input != base->input ||
              s->offset != view.offset + rel[0] * view.s0 + rel[1] * view.s1 + rel[2] * view.s2) {
            return std::nullopt;
          }
        }
      }
    }
    StitchView range;  // the part as a view, for the stage's reads
    range.buffer = view.buffer;
    range.offset = view.offset;
    range.dtype = out.dtype;
    for (int axis = 0; axis < 3; ++axis) {
      range.sizes.push_back(axis == key_axis ? last - first : sizes[axis]);
    }
    range.strides = {view.s0, view.s1, view.s2};
    (part == 0 ? result.first : result.second) = view;
    result.views.push_back(std::move(range));
  }
  if (result.split == keys) result.second = result.first;
  return result;
}

}  // namespace gpuos::registry::jit
