// build, verify, gc, export, import.
#include <filesystem>

#include "../cli_support/exit_codes.h"
#include "context.h"
#include "gpuos/registry/jit_builder.h"

namespace gpuos::cli {
namespace {

std::string Mib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

int RunBuild(const std::string& arch, int jobs, bool quiet, const RegistryContext& ctx) {
  const Output out = ctx.out();
  auto repo = ctx.Open(false);
  if (!repo.ok()) return out.Fail(repo.status());
  auto set = (*repo)->CurrentOperatorSet();
  if (!set.ok()) return out.Fail(set.status());
  if (set->empty())
    return out.Fail(NotFound("the repository has no operators; publish a pack first"));
  std::vector<registry::OperatorSpec> ops;
  for (const auto& op : *set) {
    ops.push_back(op.current);
    if (op.previous) ops.push_back(*op.previous);  // dual slot: both versions are linked
  }
  registry::JitOptions options;
  options.arch = arch;
  options.jobs = jobs;
  options.progress =
      (quiet || ctx.json) ? registry::ProgressMode::kQuiet : registry::ProgressMode::kAuto;
  registry::JitBuilder builder(repo->get(), options);
  registry::BuildStats stats;
  auto image = builder.Build(ops, &stats);
  if (!image.ok()) return out.Fail(image.status());
  out.Line("image for " + image->arch + ": " + std::to_string(stats.operators) +
           " operator versions, " + std::to_string(stats.instantiations) + " table entries, " +
           std::to_string(image->cubin.size() / 1024) + " KiB");
  out.Line(stats.image_cache_hit ? "cache hit: nothing compiled (" +
                                       std::to_string(stats.total_seconds * 1e3) + " ms)"
                                 : "compiled " + std::to_string(stats.compiled) + ", from cache " +
                                       std::to_string(stats.ltoir_cache_hits) + ", compile " +
                                       std::to_string(stats.compile_seconds) + " s, link " +
                                       std::to_string(stats.link_seconds) + " s");
  if (stats.cache_errors > 0) {
    out.Warn(std::to_string(stats.cache_errors) +
             " cache writes failed: " + stats.first_cache_error);
  }
  out.Json({{"arch", image->arch},
            {"operators", stats.operators},
            {"instantiations", stats.instantiations},
            {"cubin_bytes", image->cubin.size()},
            {"key", image->key},
            {"image_cache_hit", stats.image_cache_hit},
            {"compiled", stats.compiled},
            {"ltoir_cache_hits", stats.ltoir_cache_hits},
            {"compile_seconds", stats.compile_seconds},
            {"link_seconds", stats.link_seconds},
            {"total_seconds", stats.total_seconds},
            {"cache_errors", stats.cache_errors}});
  return kExitOk;
}

int RunVerify(bool fix, const RegistryContext& ctx) {
  const Output out = ctx.out();
  auto repo = ctx.Open(false, /*read_only=*/!fix);
  if (!repo.ok()) return out.Fail(repo.status());
  registry::VerifyOptions options;
  options.remove_corrupt_cache_entries = fix;
  auto report = (*repo)->Verify(options);
  if (!report.ok()) return out.Fail(report.status());
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : report->problems) {
    out.Line(std::string("problem: ") + registry::VerifyProblemKindName(p.kind) + ": " + p.subject +
             ": " + p.message);
    problems.push_back({{"kind", registry::VerifyProblemKindName(p.kind)},
                        {"subject", p.subject},
                        {"message", p.message}});
  }
  out.Line(
      "checked " + std::to_string(report->pack_versions_checked) + " pack versions, " +
      std::to_string(report->operator_versions_checked) + " operator versions, " +
      std::to_string(report->aliases_checked) + " aliases, " +
      std::to_string(report->cache_entries_checked) + " cache entries: " +
      (report->ok() ? "ok" : std::to_string(report->problems.size()) + " problem(s)") +
      (fix ? ", " + std::to_string(report->cache_entries_removed) + " corrupt cache entries removed"
           : ""));
  out.Json({{"ok", report->ok()},
            {"problems", problems},
            {"pack_versions_checked", report->pack_versions_checked},
            {"operator_versions_checked", report->operator_versions_checked},
            {"aliases_checked", report->aliases_checked},
            {"cache_entries_checked", report->cache_entries_checked},
            {"cache_entries_removed", report->cache_entries_removed}});
  return report->ok() ? kExitOk : kExitVerifyFailed;
}

struct GcArgs {
  double max_unused_days = 30;
  std::int64_t max_mib = -1;
  bool vacuum = false;
  bool dry_run = false;
};

int RunGc(const GcArgs& args, const RegistryContext& ctx) {
  const Output out = ctx.out();
  auto repo = ctx.Open(false, args.dry_run);
  if (!repo.ok()) return out.Fail(repo.status());
  registry::GcOptions options;
  if (args.max_unused_days >= 0) {
    options.max_unused =
        std::chrono::seconds(static_cast<std::int64_t>(args.max_unused_days * 86400));
  } else {
    options.max_unused.reset();
  }
  if (args.max_mib >= 0) options.max_total_bytes = args.max_mib << 20;
  options.vacuum = args.vacuum;
  options.dry_run = args.dry_run;
  auto r = (*repo)->Gc(options);
  if (!r.ok()) return out.Fail(r.status());
  out.Line(std::string(args.dry_run ? "would remove " : "removed ") +
           std::to_string(r->entries_removed) + " cache entries (" + Mib(r->bytes_removed) + ", " +
           std::to_string(r->corrupt_removed) + " corrupt); kept " +
           std::to_string(r->entries_kept) + " (" + Mib(r->bytes_kept) + ")");
  if (args.vacuum && !args.dry_run) {
    out.Line("file: " + Mib(r->file_bytes_before) + " -> " + Mib(r->file_bytes_after));
  }
  out.Json({{"dry_run", args.dry_run},
            {"entries_removed", r->entries_removed},
            {"bytes_removed", r->bytes_removed},
            {"corrupt_removed", r->corrupt_removed},
            {"entries_kept", r->entries_kept},
            {"bytes_kept", r->bytes_kept},
            {"file_bytes_before", r->file_bytes_before},
            {"file_bytes_after", r->file_bytes_after}});
  return kExitOk;
}

int RunExport(const std::string& path, bool no_cache, bool force, const RegistryContext& ctx) {
  const Output out = ctx.out();
  auto repo = ctx.Open(false, true);
  if (!repo.ok()) return out.Fail(repo.status());
  registry::ExportOptions options;
  options.include_build_cache = !no_cache;
  options.overwrite = force;
  auto r = (*repo)->Export(path, options);
  if (!r.ok()) return out.Fail(r.status());
  out.Line("exported to " + r->path + ": " + std::to_string(r->pack_versions) + " pack versions, " +
           std::to_string(r->operator_versions) + " operator versions, " +
           std::to_string(r->cache_entries) + " cache entries, " + Mib(r->file_bytes));
  out.Json({{"path", r->path},
            {"file_bytes", r->file_bytes},
            {"pack_versions", r->pack_versions},
            {"operator_versions", r->operator_versions},
            {"cache_entries", r->cache_entries}});
  return kExitOk;
}

int RunImport(const std::string& path, bool no_cache, const RegistryContext& ctx) {
  const Output out = ctx.out();
  // Look at the file before creating or changing anything here.
  registry::RepositoryOptions source_options;
  source_options.path = path;
  source_options.read_only = true;
  source_options.create_if_missing = false;
  {
    auto source = registry::Repository::Open(source_options);
    if (!source.ok()) return out.Fail(source.status().WithContext("import " + path));
  }
  std::error_code ec;
  const bool existed = std::filesystem::exists(ctx.DbPath(), ec);
  auto repo = ctx.Open(true);
  if (!repo.ok()) return out.Fail(repo.status());
  registry::ImportOptions options;
  options.include_build_cache = !no_cache;
  auto r = (*repo)->Import(path, options);
  if (!r.ok()) {
    if (!existed) {
      // Nothing was imported: do not leave behind a repository this command made.
      repo->reset();
      for (const char* suffix : {"", "-wal", "-shm"}) {
        std::filesystem::remove(ctx.DbPath() + suffix, ec);
      }
    }
    return out.Fail(r.status());
  }
  out.Line("imported " + path + ": " + std::to_string(r->pack_versions_added) + " pack versions (" +
           std::to_string(r->pack_versions_skipped) + " already present), " +
           std::to_string(r->operator_versions_added) + " operator versions, " +
           std::to_string(r->cache_entries_added) + " cache entries");
  for (const auto& kept : r->aliases_kept) {
    out.Line("  " + kept.name + ": kept current " + kept.target_current.ToString() +
             " (the file has " + kept.source_current.ToString() + ")");
  }
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& k : r->aliases_kept) {
    kept.push_back({{"name", k.name},
                    {"target_current", k.target_current.ToString()},
                    {"source_current", k.source_current.ToString()}});
  }
  out.Json({{"pack_versions_added", r->pack_versions_added},
            {"pack_versions_skipped", r->pack_versions_skipped},
            {"operator_versions_added", r->operator_versions_added},
            {"operator_versions_skipped", r->operator_versions_skipped},
            {"operators_added", r->operators_added},
            {"aliases_kept", kept},
            {"cache_entries_added", r->cache_entries_added},
            {"cache_entries_corrupt", r->cache_entries_corrupt},
            {"source_migrated", r->source_migrated}});
  return kExitOk;
}

}  // namespace

void AddBuildCommand(CLI::App& app, RegistryContext& ctx) {
  struct Args {
    std::string arch;
    int jobs = 0;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "build",
      "Build the kernel image of every current and previous operator version for one\n"
      "architecture, warming the build cache (a second build is a cache hit).");
  cmd->add_option("--arch", args->arch,
                  "sm_80, sm_90, sm_90a, ... (default: $GPUOS_ARCH, else the GPU's)");
  cmd->add_option("-j,--jobs", args->jobs, "parallel compilations (default: $GPUOS_JOBS or cores)");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress output");
  cmd->callback(
      [args, &ctx] { ctx.exit_code = RunBuild(args->arch, args->jobs, args->quiet, ctx); });
}

void AddVerifyCommand(CLI::App& app, RegistryContext& ctx) {
  auto fix = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "verify",
      "Check the database's integrity and the hash of every stored pack, operator version\n"
      "and cache blob. Exit code 9 when something is wrong.");
  cmd->add_flag("--fix", *fix, "delete corrupt cache entries (they are rebuilt on demand)");
  cmd->callback([fix, &ctx] { ctx.exit_code = RunVerify(*fix, ctx); });
}

void AddGcCommand(CLI::App& app, RegistryContext& ctx) {
  auto args = std::make_shared<GcArgs>();
  auto* cmd =
      app.add_subcommand("gc", "Remove build-cache entries unused for a while (and corrupt ones).");
  cmd->add_option("--max-unused-days", args->max_unused_days,
                  "remove entries unused for longer (default 30; -1: no age rule)")
      ->check(CLI::Range(-1.0, 36500.0));
  cmd->add_option("--max-mib", args->max_mib, "then remove least recently used down to this size")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  cmd->add_flag("--vacuum", args->vacuum, "return the freed space to the file system");
  cmd->add_flag("-n,--dry-run", args->dry_run, "only count what would be removed");
  cmd->callback([args, &ctx] { ctx.exit_code = RunGc(*args, ctx); });
}

void AddExportCommand(CLI::App& app, RegistryContext& ctx) {
  struct Args {
    std::string path;
    bool no_cache = false, force = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "export", "Write a consistent, self-contained copy of the repository to a file.");
  cmd->add_option("file", args->path, "destination file")->required();
  cmd->add_flag("--no-cache", args->no_cache, "leave the build cache out (smaller)");
  cmd->add_flag("-f,--force", args->force, "replace an existing file");
  cmd->callback(
      [args, &ctx] { ctx.exit_code = RunExport(args->path, args->no_cache, args->force, ctx); });
}

void AddImportCommand(CLI::App& app, RegistryContext& ctx) {
  struct Args {
    std::string path;
    bool no_cache = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "import",
      "Merge an exported repository file into this one (one transaction): new versions are\n"
      "added; operators this repository lacks take the file's aliases; existing aliases stay.");
  cmd->add_option("file", args->path, "an exported repository file")->required();
  cmd->add_flag("--no-cache", args->no_cache, "do not copy build-cache entries");
  cmd->callback([args, &ctx] { ctx.exit_code = RunImport(args->path, args->no_cache, ctx); });
}

}  // namespace gpuos::cli
