#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace gpuos::registry::jit {
namespace {

std::string Milliseconds(double seconds) {
  return std::to_string(static_cast<long long>(seconds * 1000 + 0.5)) + " ms";
}

}  // namespace

ProgressReporter::ProgressReporter(const JitOptions& options, std::string arch, int total)
    : options_(options), arch_(std::move(arch)), mode_(options.progress), total_(total) {
  if (options_.on_event) {
    mode_ = ProgressMode::kQuiet;
  } else if (mode_ == ProgressMode::kAuto) {
    mode_ = (isatty(STDERR_FILENO) != 0 && total_ > 1) ? ProgressMode::kBar : ProgressMode::kLines;
  }
}

ProgressReporter::~ProgressReporter() {
  if (bar_drawn_) std::fputc('\n', stderr);
}

void ProgressReporter::DrawBar(const std::string& label) {
  constexpr int kWidth = 30;
  const int filled = total_ > 0 ? done_ * kWidth / total_ : kWidth;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r\033[K[%s] %d/%d %s (%s)", bar.c_str(), done_, total_, label.c_str(),
               arch_.c_str());
  std::fflush(stderr);
  bar_drawn_ = true;
}

void ProgressReporter::StartLink(int units) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (mode_ == ProgressMode::kBar) DrawBar("linking " + std::to_string(units) + " modules");
}

void ProgressReporter::Report(BuildEvent event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (event.stage == BuildEvent::Stage::kCompile) {
    event.done = ++done_;
    event.total = total_;
  }
  if (options_.on_event) {
    options_.on_event(event);
    return;
  }
  switch (mode_) {
    case ProgressMode::kQuiet:
    case ProgressMode::kAuto:
      return;
    case ProgressMode::kBar:
      DrawBar((event.stage == BuildEvent::Stage::kLink ? "linked "
               : event.failed                          ? "FAILED "
                                                       : "compiled ") +
              event.unit);
      return;
    case ProgressMode::kLines:
      if (event.stage == BuildEvent::Stage::kCompile) {
        std::fprintf(stderr, "gpuos: [%d/%d] %s %s for %s in %s\n", event.done, event.total,
                     event.failed ? "failed to compile" : "compiled", event.unit.c_str(),
                     arch_.c_str(), Milliseconds(event.seconds).c_str());
      } else {
        std::fprintf(stderr, "gpuos: linked %s for %s in %s\n", event.unit.c_str(), arch_.c_str(),
                     Milliseconds(event.seconds).c_str());
      }
      return;
  }
}

}  // namespace gpuos::registry::jit
