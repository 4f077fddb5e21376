// list, show, history: read-only views of the repository.
#include <cstdio>

#include "../cli_support/exit_codes.h"
#include "context.h"
#include "gpuos/registry/operator_spec_json.h"
#include "render.h"

namespace gpuos::cli {
namespace {

std::string Pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

int RunList(const RegistryContext& ctx) {
  const Output out = ctx.out();
  auto repo = ctx.Open(false, /*read_only=*/true);
  if (!repo.ok()) return out.Fail(repo.status());
  auto ops = (*repo)->ListOperators();
  if (!ops.ok()) return out.Fail(ops.status());
  nlohmann::json rows = nlohmann::json::array();
  if (!ctx.json) {
    out.Line(Pad("OPERATOR", 24) + Pad("CURRENT", 10) + Pad("PREVIOUS", 10) + Pad("KIND", 13) +
             "PACK");
  }
  for (const auto& op : *ops) {
    const std::string prev = op.previous ? op.previous->ToString() : "-";
    out.Line(Pad(op.name, 24) + Pad(op.current.ToString(), 10) + Pad(prev, 10) +
             Pad(registry::OperatorKindName(op.kind), 13) + op.pack);
    rows.push_back({{"name", op.name},
                    {"pack", op.pack},
                    {"kind", registry::OperatorKindName(op.kind)},
                    {"current", op.current.ToString()},
                    {"previous", op.previous ? nlohmann::json(prev) : nlohmann::json(nullptr)},
                    {"updated_at", registry::FormatTimestamp(op.updated_at_ms)}});
  }
  if (ops->empty()) out.Line("(no operators; publish a pack first)");
  out.Json({{"repository", (*repo)->path()}, {"operators", rows}});
  return kExitOk;
}

int RunShow(const std::string& ref, bool source, const RegistryContext& ctx) {
  const Output out = ctx.out();
  std::string name;
  std::optional<registry::SemVer> version;
  if (Status s = ParseOperatorRef(ref, &name, &version); !s.ok()) return out.Fail(s);
  auto repo = ctx.Open(false, true);
  if (!repo.ok()) return out.Fail(repo.status());
  auto record = (*repo)->GetOperator(name, version);
  if (!record.ok()) return out.Fail(record.status());
  const auto& info = record->info;
  std::string pack_source;
  if (source) {
    auto text = (*repo)->GetPackSource(info.pack, info.pack_version);
    if (!text.ok()) return out.Fail(text.status());
    pack_source = *text;
  }
  if (ctx.json) {
    nlohmann::json doc = {{"name", info.name},
                          {"version", info.version.ToString()},
                          {"slot", registry::AliasSlotName(info.slot)},
                          {"pack", info.pack},
                          {"pack_version", info.pack_version.ToString()},
                          {"content_hash", info.content_hash},
                          {"published_at", registry::FormatTimestamp(info.published_at_ms)},
                          {"actor", info.actor},
                          {"spec", registry::OperatorToJson(record->spec, true)}};
    if (source) doc["pack_source"] = pack_source;
    out.Json(doc);
    return kExitOk;
  }
  std::string slot = registry::AliasSlotName(info.slot);
  out.Line("# " + info.name + "@" + info.version.ToString() +
           (slot.empty() ? "" : " (" + slot + ")") + " from pack " + info.pack + " " +
           info.pack_version.ToString() + ", published " + ShortTime(info.published_at_ms) +
           " by " + info.actor);
  out.Line("# content hash " + info.content_hash);
  std::string text = RenderSpec(record->spec);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  out.Line(text);
  if (source) {
    out.Line("# pack source (" + info.pack + " " + info.pack_version.ToString() + "):");
    out.Line(pack_source);
  }
  return kExitOk;
}

int RunVersions(const std::string& op, const RegistryContext& ctx) {
  const Output out = ctx.out();
  auto repo = ctx.Open(false, true);
  if (!repo.ok()) return out.Fail(repo.status());
  auto versions = (*repo)->ListVersions(op);
  if (!versions.ok()) return out.Fail(versions.status());
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& v : *versions) {
    const std::string slot = registry::AliasSlotName(v.slot);
    out.Line(Pad(v.version.ToString(), 10) + Pad(slot.empty() ? "-" : slot, 10) +
             Pad(v.pack + " " + v.pack_version.ToString(), 28) + ShortTime(v.published_at_ms) +
             "  " + v.actor);
    rows.push_back({{"version", v.version.ToString()},
                    {"slot", slot},
                    {"kind", registry::OperatorKindName(v.kind)},
                    {"content_hash", v.content_hash},
                    {"pack", v.pack},
                    {"pack_version", v.pack_version.ToString()},
                    {"published_at", registry::FormatTimestamp(v.published_at_ms)},
                    {"actor", v.actor}});
  }
  out.Json({{"operator", op}, {"versions", rows}});
  return kExitOk;
}

int RunHistory(const std::string& op, std::size_t limit, const RegistryContext& ctx) {
  const Output out = ctx.out();
  auto repo = ctx.Open(false, true);
  if (!repo.ok()) return out.Fail(repo.status());
  if (!op.empty()) {
    // An unknown name is an error rather than an empty history.
    auto exists = (*repo)->ListVersions(op);
    if (!exists.ok()) return out.Fail(exists.status());
  }
  registry::HistoryQuery query;
  query.operator_name = op;
  query.limit = limit;
  auto rows = (*repo)->History(query);
  if (!rows.ok()) return out.Fail(rows.status());
  nlohmann::json doc = nlohmann::json::array();
  for (const auto& h : *rows) {
    std::string what = h.operator_name.empty() ? h.pack + " " + h.pack_version : h.operator_name;
    std::string change =
        h.from_version.empty() ? h.to_version : h.from_version + " -> " + h.to_version;
    out.Line(ShortTime(h.at_ms) + "  " + Pad(registry::HistoryActionName(h.action), 9) +
             Pad(what, 22) + Pad(change, 20) + h.actor + (h.detail.empty() ? "" : "  " + h.detail));
    doc.push_back({{"id", h.id},
                   {"at", registry::FormatTimestamp(h.at_ms)},
                   {"action", registry::HistoryActionName(h.action)},
                   {"operator", h.operator_name},
                   {"pack", h.pack},
                   {"pack_version", h.pack_version},
                   {"from", h.from_version},
                   {"to", h.to_version},
                   {"actor", h.actor},
                   {"detail", h.detail}});
  }
  out.Json({{"history", doc}});
  return kExitOk;
}

}  // namespace

void AddListCommand(CLI::App& app, RegistryContext& ctx) {
  auto* cmd =
      app.add_subcommand("list", "List operators with their current and previous versions.");
  cmd->callback([&ctx] { ctx.exit_code = RunList(ctx); });
}

void AddShowCommand(CLI::App& app, RegistryContext& ctx) {
  auto ref = std::make_shared<std::string>();
  auto source = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "show", "Show one operator version (the current one unless @version is given).");
  cmd->add_option("operator", *ref, "NAME or NAME@VERSION")->required();
  cmd->add_flag("--source", *source, "also print the YAML of the pack version it came from");
  cmd->callback([ref, source, &ctx] { ctx.exit_code = RunShow(*ref, *source, ctx); });
}

void AddVersionsCommand(CLI::App& app, RegistryContext& ctx) {
  auto op = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "versions", "Every stored version of an operator, and which one is current or previous.");
  cmd->add_option("operator", *op, "operator name")->required();
  cmd->callback([op, &ctx] { ctx.exit_code = RunVersions(*op, ctx); });
}

void AddHistoryCommand(CLI::App& app, RegistryContext& ctx) {
  auto op = std::make_shared<std::string>();
  auto limit = std::make_shared<std::size_t>(0);
  auto* cmd = app.add_subcommand(
      "history", "Audit history of publishes and rollbacks (of one operator, or of all).");
  cmd->add_option("operator", *op, "operator name (default: everything)");
  cmd->add_option("-n,--limit", *limit, "only the newest N entries");
  cmd->callback([op, limit, &ctx] { ctx.exit_code = RunHistory(*op, *limit, ctx); });
}

}  // namespace gpuos::cli
