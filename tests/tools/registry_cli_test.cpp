// End-to-end tests of the gpuos-registry binary: what a user types, what the
// repository looks like afterwards, and the exit codes of docs/gpuos-registry.md.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "command_runner.h"
#include "gpuos/control/control_client.h"
#include "gpuos/control/control_server.h"

namespace gpuos {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

const std::string kTool = std::string(GPUOS_BINARY_DIR) + "/bin/gpuos-registry";
const std::string kThirdParty =
    std::string(GPUOS_SOURCE_DIR) + "/tests/data/packs/good/third_party.yaml";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class RegistryCliTest : public ::testing::Test {
 protected:
  std::string db() const { return dir_.path() + "/registry.db"; }
  // Runs gpuos-registry against this test's repository.
  CommandResult Registry(const std::string& args) const {
    return RunCommand("GPUOS_ARCH= " + kTool + " --db " + db() + " " + args);
  }
  nlohmann::json RegistryJson(const std::string& args) const {
    CommandResult r = Registry("--json " + args + " 2>/dev/null");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  }
  // The third-party pack with every version bumped to 1.1.0 and leaky_relu's
  // body changed, as a new file.
  std::string WriteBumpedPack() const {
    std::string text = ReadFile(kThirdParty);
    text = std::regex_replace(text, std::regex("version: 1\\.[01]\\.0"), "version: 1.2.0");
    text = std::regex_replace(text, std::regex("static_cast<compute_t>\\(slope\\) \\* x;"),
                              "static_cast<compute_t>(slope) * x * static_cast<compute_t>(1);");
    const std::string path = dir_.path() + "/third_party_v2.yaml";
    WriteFile(path, text);
    return path;
  }
  std::string ListCurrent(const std::string& op) const {
    auto doc = RegistryJson("list");
    for (const auto& row : doc["operators"]) {
      if (row["name"] == op) return row["current"].get<std::string>();
    }
    return "";
  }

  TempDir dir_;
};

TEST_F(RegistryCliTest, EverySubcommandHasHelp) {
  for (const char* sub : {"publish", "list", "show", "history", "rollback", "diff", "build",
                          "verify", "gc", "export", "import", "status", "versions"}) {
    CommandResult r = RunCommand(kTool + " " + sub + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub << ": " << r.output;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << sub;
  }
  CommandResult r = RunCommand(kTool + " frobnicate");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST_F(RegistryCliTest, ThirdPartyPackPublishesShowsRollsBackDiffsAndBuilds) {
  CommandResult published = Registry("publish " + kThirdParty);
  ASSERT_EQ(published.exit_code, 0) << published.output;
  EXPECT_NE(published.output.find("published acme.activations 1.0.0"), std::string::npos);
  EXPECT_EQ(ListCurrent("leaky_relu"), "1.0.0");

  CommandResult show = Registry("show leaky_relu");
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("attribute: slope: f32 = 0.01"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("(current)"), std::string::npos) << show.output;

  ASSERT_EQ(Registry("publish " + WriteBumpedPack()).exit_code, 0);
  EXPECT_EQ(ListCurrent("leaky_relu"), "1.2.0");

  CommandResult diff = Registry("diff leaky_relu 1.0.0 1.2.0");
  ASSERT_EQ(diff.exit_code, 0) << diff.output;
  EXPECT_NE(diff.output.find("-version: 1.0.0"), std::string::npos) << diff.output;
  EXPECT_NE(diff.output.find("+version: 1.2.0"), std::string::npos) << diff.output;
  EXPECT_NE(diff.output.find("static_cast<compute_t>(1);"), std::string::npos) << diff.output;

  CommandResult rollback = Registry("rollback leaky_relu -m 'bad numerics'");
  ASSERT_EQ(rollback.exit_code, 0) << rollback.output;
  EXPECT_EQ(ListCurrent("leaky_relu"), "1.0.0");
  EXPECT_EQ(ListCurrent("softplus"), "1.2.0");  // only the named operator moved
  ASSERT_EQ(Registry("rollback leaky_relu --to 1.2.0").exit_code, 0);
  EXPECT_EQ(ListCurrent("leaky_relu"), "1.2.0");

  auto history = RegistryJson("history leaky_relu");
  std::vector<std::string> actions;
  for (const auto& h : history["history"]) actions.push_back(h["action"]);
  EXPECT_EQ(actions, (std::vector<std::string>{"publish", "publish", "rollback", "rollback"}));

  for (const char* arch : {"sm_80", "sm_90"}) {
    auto first = RegistryJson(std::string("build --arch ") + arch);
    EXPECT_EQ(first["arch"], arch);
    EXPECT_FALSE(first["image_cache_hit"].get<bool>());
    EXPECT_GT(first["cubin_bytes"].get<int>(), 0);
    // Current and previous versions of all four operators are linked.
    EXPECT_EQ(first["operators"].get<int>(), 8);
    auto second = RegistryJson(std::string("build --arch ") + arch);
    EXPECT_TRUE(second["image_cache_hit"].get<bool>());
    EXPECT_EQ(second["compiled"].get<int>(), 0);
  }
  EXPECT_EQ(Registry("verify").exit_code, 0);
}

TEST_F(RegistryCliTest, ExportImportMovesARepository) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  const std::string file = dir_.path() + "/moved.gpuos";
  CommandResult exported = Registry("export " + file);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::string other = dir_.path() + "/other.db";
  CommandResult imported = RunCommand(kTool + " --db " + other + " import " + file);
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  CommandResult list = RunCommand(kTool + " --db " + other + " list");
  EXPECT_NE(list.output.find("leaky_relu"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("l2_norm"), std::string::npos) << list.output;
  // Exporting onto an existing file needs --force.
  EXPECT_NE(Registry("export " + file).exit_code, 0);
  EXPECT_EQ(Registry("export --force " + file).exit_code, 0);
}

TEST_F(RegistryCliTest, MalformedPackIsRejectedWithFileAndLineAndChangesNothing) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  const std::string before = Registry("--json list").output;
  const std::string bad =
      std::string(GPUOS_SOURCE_DIR) + "/tests/data/packs/bad/duplicate_key.yaml";
  CommandResult r = Registry("publish " + bad);
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("duplicate_key\\.yaml:[0-9]+:[0-9]+: error")))
      << r.output;
  EXPECT_EQ(Registry("--json list").output, before);
}

TEST_F(RegistryCliTest, BodyThatDoesNotCompileIsRejectedWithItsPackLine) {
  const std::string pack = dir_.path() + "/broken.yaml";
  WriteFile(pack,
            "gpuos_pack: 1\nname: mine\nversion: 0.1.0\noperators:\n"
            "  - name: twice\n    version: 1.0.0\n    kind: elementwise\n    dtypes: [f32]\n"
            "    inputs: [{name: a}]\n    outputs: [{name: out}]\n    body: |\n"
            "      compute_t t = a * 2;\n      out = t +;\n");
  CommandResult r = Registry("publish " + pack);
  EXPECT_EQ(r.exit_code, 6) << r.output;
  EXPECT_NE(r.output.find("broken.yaml:13: error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("twice"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(db())) << "a failed first publish must not create the file";
}

TEST_F(RegistryCliTest, UnknownOperatorsAndVersionsAreNotFound) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  EXPECT_EQ(Registry("show nope").exit_code, 3);
  EXPECT_EQ(Registry("show leaky_relu@9.9.9").exit_code, 3);
  EXPECT_EQ(Registry("rollback nope").exit_code, 3);
  EXPECT_EQ(Registry("rollback leaky_relu --to 9.9.9").exit_code, 3);
  EXPECT_EQ(Registry("diff leaky_relu 1.0.0 9.9.9").exit_code, 3);
  EXPECT_EQ(Registry("history nope").exit_code, 3);
  CommandResult no_previous = Registry("rollback leaky_relu");
  EXPECT_EQ(no_previous.exit_code, 7) << no_previous.output;  // nothing to roll back to
  EXPECT_NE(no_previous.output.find("leaky_relu"), std::string::npos);
  CommandResult bad_ref = Registry("show leaky_relu@1.0");
  EXPECT_EQ(bad_ref.exit_code, 5) << bad_ref.output;
}

TEST_F(RegistryCliTest, ConflictingRepublishIsAConflict) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  std::string text = ReadFile(kThirdParty);
  text = std::regex_replace(text, std::regex("default: 0\\.01"), "default: 0.02");
  const std::string changed = dir_.path() + "/same_version_other_content.yaml";
  WriteFile(changed, text);
  CommandResult r = Registry("publish " + changed);
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_EQ(ListCurrent("leaky_relu"), "1.0.0");
}

TEST_F(RegistryCliTest, FileThatIsNotARepositoryIsRefused) {
  WriteFile(db(), "this is a text file, not a database\n");
  CommandResult r = Registry("list");
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("not a gpuos repository"), std::string::npos) << r.output;
  EXPECT_EQ(ReadFile(db()), "this is a text file, not a database\n");
}

TEST_F(RegistryCliTest, RepositoryFromANewerSchemaIsRefused) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db().c_str(), &handle), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(handle, "PRAGMA user_version = 999", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(handle);
  CommandResult r = Registry("list");
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("newer gpuos"), std::string::npos) << r.output;
}

TEST_F(RegistryCliTest, ReadOnlyRepositoryRefusesChangesButAnswersQueries) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  ASSERT_EQ(Registry("publish " + WriteBumpedPack()).exit_code, 0);
  namespace fs = std::filesystem;
  // Root ignores file permissions, so as root the tool runs as `nobody`.
  std::string as_user;
  if (geteuid() == 0) {
    if (RunCommand("command -v runuser").exit_code != 0) {
      GTEST_SKIP() << "running as root without runuser: cannot drop privileges";
    }
    as_user = "runuser -u nobody -- ";
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
  }
  fs::permissions(db(), fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const std::string tool = as_user + kTool + " --db " + db() + " ";
  CommandResult list = RunCommand(tool + "list");
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("leaky_relu"), std::string::npos) << list.output;
  CommandResult r = RunCommand(tool + "rollback leaky_relu");
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("read-only"), std::string::npos) << r.output;
  CommandResult p = RunCommand(tool + "publish --no-compile-check " + kThirdParty);
  EXPECT_EQ(p.exit_code, 7) << p.output;
  fs::permissions(db(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(ListCurrent("leaky_relu"), "1.2.0");
}

// Review finding: a dangling reference in an import file aborted the tool.
TEST_F(RegistryCliTest, ImportOfADamagedFileFailsCleanlyAndCreatesNothing) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  const std::string file = dir_.path() + "/damaged.gpuos";
  ASSERT_EQ(Registry("export " + file).exit_code, 0);
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &handle), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(handle, "INSERT INTO pack_version_operators VALUES (1, 999)", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(handle);
  const std::string target = dir_.path() + "/target.db";
  CommandResult r = RunCommand(kTool + " --db " + target + " import " + file);
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("nothing was imported"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(target)) << r.output;

  WriteFile(dir_.path() + "/text.gpuos", "not a database\n");
  CommandResult text =
      RunCommand(kTool + " --db " + target + " import " + dir_.path() + "/text.gpuos");
  EXPECT_EQ(text.exit_code, 7) << text.output;
  EXPECT_FALSE(std::filesystem::exists(target));
  CommandResult missing =
      RunCommand(kTool + " --db " + target + " import " + dir_.path() + "/none");
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
}

// Review finding: a non-UTF-8 publish message made every later --json history abort.
TEST_F(RegistryCliTest, TextThatIsNotUtf8DoesNotBreakJsonOutput) {
  // printf writes the byte 0xff, which is not UTF-8.
  ASSERT_EQ(Registry("publish -m \"$(printf 'bad \\377 message')\" " + kThirdParty).exit_code, 0);
  CommandResult r = Registry("--json history");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("bad"), std::string::npos) << r.output;
}

TEST_F(RegistryCliTest, VersionsListsEverySlot) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  ASSERT_EQ(Registry("publish " + WriteBumpedPack()).exit_code, 0);
  auto doc = RegistryJson("versions leaky_relu");
  ASSERT_EQ(doc["versions"].size(), 2u);
  EXPECT_EQ(doc["versions"][0]["version"], "1.0.0");
  EXPECT_EQ(doc["versions"][0]["slot"], "previous");
  EXPECT_EQ(doc["versions"][1]["slot"], "current");
  EXPECT_EQ(Registry("versions nope").exit_code, 3);
}

// Review finding: a huge age overflowed and removed the whole cache.
TEST_F(RegistryCliTest, GcRefusesAgesItCannotRepresent) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);
  ASSERT_EQ(Registry("build -q --arch sm_90").exit_code, 0);
  EXPECT_EQ(Registry("gc -n --max-unused-days 1e12").exit_code, 2);
  auto doc = RegistryJson("gc -n");
  EXPECT_EQ(doc["entries_removed"], 0);
  EXPECT_GT(doc["entries_kept"].get<int>(), 0);
}

// A stand-in for a live runtime: records what gpuos-registry tells it.
class RecordingRuntime : public control::ControlHandler {
 public:
  Expected<nlohmann::json> Status() override {
    return nlohmann::json{{"image", "sm_90 test image"}, {"operators", {"leaky_relu@1.0.0"}}};
  }
  Expected<nlohmann::json> Published(const control::Request& request) override {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(request);
    return nlohmann::json{{"action", "epoch_switch"}, {"stage_ms", 12.5}, {"gap_us", 310.0}};
  }
  Expected<nlohmann::json> RolledBack(const control::Request& request) override {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(request);
    return nlohmann::json{{"action", "alias_flip"}};
  }
  std::vector<control::Request> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  std::mutex mutex_;
  std::vector<control::Request> requests_;
};

TEST_F(RegistryCliTest, PublishAndRollbackNotifyLiveRuntimesAndStatusListsThem) {
  ASSERT_EQ(Registry("publish " + kThirdParty).exit_code, 0);  // creates the repository
  RecordingRuntime runtime;
  control::ControlServerOptions options;
  options.socket_path = control::RuntimeSocketPath(db(), getpid());
  options.handler = &runtime;
  auto server = control::ControlServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();

  CommandResult status = Registry("status");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("sm_90 test image"), std::string::npos) << status.output;

  CommandResult publish = Registry("publish " + WriteBumpedPack());
  ASSERT_EQ(publish.exit_code, 0) << publish.output;
  EXPECT_NE(publish.output.find(": epoch_switch (staged in 12.5"), std::string::npos)
      << publish.output;
  CommandResult rollback = Registry("rollback leaky_relu");
  ASSERT_EQ(rollback.exit_code, 0) << rollback.output;
  EXPECT_NE(rollback.output.find(": alias_flip"), std::string::npos) << rollback.output;

  auto requests = runtime.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].command, control::Command::kPublished);
  EXPECT_EQ(requests[0].repository, db());
  EXPECT_EQ(requests[0].operators.size(), 4u);  // every operator of the pack moved to 1.2.0
  EXPECT_EQ(requests[1].command, control::Command::kRolledBack);
  ASSERT_EQ(requests[1].operators.size(), 1u);
  EXPECT_EQ(requests[1].operators[0].name, "leaky_relu");
  EXPECT_EQ(requests[1].operators[0].version, "1.0.0");

  // A runtime that went away leaves a stale socket: reported and removed.
  (*server)->Stop();
  ASSERT_EQ(Registry("rollback leaky_relu").exit_code, 0);
  CommandResult none = Registry("status");
  EXPECT_NE(none.output.find("no live runtime"), std::string::npos) << none.output;
}

TEST_F(RegistryCliTest, MissingRepositoryIsExplained) {
  CommandResult r = Registry("list");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("publish a pack to create one"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gpuos
