// Live updates without a GPU (docs/live-update.md): the host dispatch table
// (logical ids, alias flips, interface changes), update planning, and the
// epoch-switch steps driven against a fake device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "epoch_switch.h"
#include "operator_table.h"
#include "update_plan.h"

namespace gpuos::runtime {
namespace {

using registry::SemVer;

registry::OperatorSpec Spec(const std::string& name, SemVer version, bool extra_attribute = false) {
  registry::OperatorSpec spec;
  spec.name = name;
  spec.version = version;
  spec.dtypes = {DType::kF32, DType::kF16};
  spec.inputs = {{"x", std::nullopt, "", registry::TypeVariable::kT}};
  spec.outputs = {{"out", std::nullopt, "", registry::TypeVariable::kT}};
  spec.attributes = {{"alpha", registry::AttributeType::kF64, "1", ""}};
  if (extra_attribute) spec.attributes.push_back({"beta", registry::AttributeType::kF64, "0", ""});
  spec.body.code = "out = x;";
  return spec;
}

// An image holding every dtype of `specs`, slots in order.
registry::KernelImage Image(const std::vector<registry::OperatorSpec>& specs) {
  registry::KernelImage image;
  std::uint32_t slot = 1;
  for (const auto& spec : specs) {
    for (DType dtype : spec.dtypes) {
      registry::ImageEntry entry;
      entry.op_name = spec.name;
      entry.version = spec.version;
      entry.dtype = dtype;
      entry.slot = slot++;
      entry.symbol = spec.name + "_" + spec.version.ToString() + "_" + DTypeName(dtype);
      image.entries.push_back(entry);
    }
  }
  image.table_size = slot;
  image.key = "image-" + std::to_string(specs.size());
  return image;
}

std::vector<const registry::OperatorSpec*> Pointers(const std::vector<registry::OperatorSpec>& s) {
  std::vector<const registry::OperatorSpec*> pointers;
  for (const auto& spec : s) pointers.push_back(&spec);
  return pointers;
}

std::uint32_t SlotOf(const registry::KernelImage& image, const std::string& op, SemVer version,
                     DType dtype) {
  const registry::ImageEntry* entry = image.Find(op, version, dtype);
  return entry == nullptr ? 0 : entry->slot;
}

class OperatorTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    specs_ = {Spec("scale", {1, 0, 0}), Spec("scale", {1, 1, 0}), Spec("neg", {2, 0, 0})};
    image_ = Image(specs_);
    ASSERT_TRUE(table_.Load(image_, Pointers(specs_), {{"scale", {1, 0, 0}}}).ok());
  }
  std::vector<registry::OperatorSpec> specs_;
  registry::KernelImage image_;
  OperatorTable table_;
};

TEST_F(OperatorTableTest, ActiveVersionIsTheRequestedOneElseTheNewest) {
  auto scale = table_.Resolve("scale", DType::kF32, std::nullopt);
  ASSERT_TRUE(scale.ok()) << scale.status().ToString();
  EXPECT_EQ(scale->version, (SemVer{1, 0, 0}));
  EXPECT_EQ(scale->slot, SlotOf(image_, "scale", {1, 0, 0}, DType::kF32));
  EXPECT_EQ(scale->spec, &specs_[0]);
  auto neg = table_.Resolve("neg", DType::kF16, std::nullopt);
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(neg->version, (SemVer{2, 0, 0}));
  EXPECT_NE(neg->logical, scale->logical);
  const auto aliases = table_.AliasTable();
  EXPECT_EQ(aliases[scale->logical], scale->slot);
  EXPECT_EQ(aliases[neg->logical], neg->slot);
  EXPECT_EQ(table_.VersionsInImage("scale"), (std::vector<SemVer>{{1, 0, 0}, {1, 1, 0}}));
}

TEST_F(OperatorTableTest, AliasFlipKeepsLogicalIdsAndMovesSlots) {
  const auto before = *table_.Resolve("scale", DType::kF16, std::nullopt);
  auto changed = table_.Activate("scale", {1, 1, 0});
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(*changed);
  const auto after = *table_.Resolve("scale", DType::kF16, std::nullopt);
  EXPECT_EQ(after.logical, before.logical);  // graphs built earlier keep working
  EXPECT_EQ(after.slot, SlotOf(image_, "scale", {1, 1, 0}, DType::kF16));
  EXPECT_EQ(table_.Slot(before.logical), after.slot);
  EXPECT_EQ(table_.ActiveVersions().at("scale"), (SemVer{1, 1, 0}));
  // Flipping to the active version changes nothing.
  EXPECT_FALSE(*table_.Activate("scale", {1, 1, 0}));
}

TEST_F(OperatorTableTest, FlipToAVersionTheImageLacksFailsAndChangesNothing) {
  const auto before = table_.AliasTable();
  auto missing = table_.Activate("scale", {3, 0, 0});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("epoch switch"), std::string::npos);
  EXPECT_NE(missing.status().message().find("1.0.0, 1.1.0"), std::string::npos)
      << missing.status().message();
  EXPECT_EQ(table_.AliasTable(), before);
  EXPECT_EQ(table_.Activate("nope", {1, 0, 0}).status().code(), StatusCode::kNotFound);
}

TEST_F(OperatorTableTest, NewImageKeepsIdsOfUnchangedInterfacesAndRetiresOthers) {
  const auto scale = *table_.Resolve("scale", DType::kF32, std::nullopt);
  const auto neg = *table_.Resolve("neg", DType::kF32, std::nullopt);
  // Epoch 2: scale 2.0.0 has another attribute; neg is gone.
  std::vector<registry::OperatorSpec> next = {Spec("scale", {2, 0, 0}, true),
                                              Spec("scale", {1, 1, 0})};
  const auto image = Image(next);
  ASSERT_TRUE(table_.Load(image, Pointers(next), {{"scale", {2, 0, 0}}}).ok());
  const auto scale2 = *table_.Resolve("scale", DType::kF32, std::nullopt);
  EXPECT_NE(scale2.logical, scale.logical);
  EXPECT_EQ(scale2.slot, SlotOf(image, "scale", {2, 0, 0}, DType::kF32));
  EXPECT_EQ(table_.Slot(scale.logical), 0u);
  EXPECT_NE(table_.Unresolvable(scale.logical).find("interface"), std::string::npos);
  EXPECT_EQ(table_.Slot(neg.logical), 0u);
  EXPECT_NE(table_.Unresolvable(neg.logical).find("no longer has"), std::string::npos);
  EXPECT_EQ(table_.Resolve("neg", DType::kF32, std::nullopt).status().code(),
            StatusCode::kNotFound);
  // Rolling back to 1.1.0 (same interface as the retired id): a new id again,
  // never a reuse, so graphs of 2.0.0 stop resolving too.
  ASSERT_TRUE(table_.Activate("scale", {1, 1, 0}).ok());
  const auto back = *table_.Resolve("scale", DType::kF32, std::nullopt);
  EXPECT_NE(back.logical, scale.logical);
  EXPECT_NE(back.logical, scale2.logical);
  EXPECT_EQ(table_.Slot(scale2.logical), 0u);
}

TEST_F(OperatorTableTest, ResolveNamesWhatTheImageHas) {
  auto bad = table_.Resolve("scale", DType::kI64, std::nullopt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("f32, f16"), std::string::npos) << bad.status().message();
  EXPECT_NE(table_.Resolve("gone", DType::kF32, std::nullopt).status().message().find("publish"),
            std::string::npos);
}

// A version may add a dtype: flipping back keeps the added dtype on the
// version that has it, and the flip is a flip (no epoch switch needed).
TEST(OperatorTableDtypesTest, FlipAcrossVersionsWithDifferentDtypes) {
  std::vector<registry::OperatorSpec> specs = {Spec("scale", {1, 0, 0}), Spec("scale", {1, 1, 0})};
  specs[0].dtypes = {DType::kF32};  // 1.1.0 adds f16
  const auto image = Image(specs);
  OperatorTable table;
  ASSERT_TRUE(table.Load(image, Pointers(specs), {{"scale", {1, 1, 0}}}).ok());
  auto flipped = table.Activate("scale", {1, 0, 0});
  ASSERT_TRUE(flipped.ok()) << flipped.status().ToString();
  EXPECT_TRUE(*flipped);
  EXPECT_EQ(table.Resolve("scale", DType::kF32, std::nullopt)->version, (SemVer{1, 0, 0}));
  EXPECT_EQ(table.Resolve("scale", DType::kF16, std::nullopt)->version, (SemVer{1, 1, 0}));
  EXPECT_EQ(table.ActiveVersions().at("scale"), (SemVer{1, 0, 0}));
  LiveOperator rolled_back{specs[0], specs[1]};
  EXPECT_EQ(PlanUpdate(table, {rolled_back}).action, UpdateAction::kNone);
  LiveOperator forward{specs[1], specs[0]};
  EXPECT_EQ(PlanUpdate(table, {forward}).action, UpdateAction::kAliasFlip);
}

TEST(UpdatePlanTest, NoneFlipOrSwitch) {
  std::vector<registry::OperatorSpec> specs = {Spec("scale", {1, 0, 0}), Spec("scale", {1, 1, 0})};
  const auto image = Image(specs);
  OperatorTable table;
  ASSERT_TRUE(table.Load(image, Pointers(specs), {{"scale", {1, 1, 0}}}).ok());

  LiveOperator same{Spec("scale", {1, 1, 0}), Spec("scale", {1, 0, 0})};
  EXPECT_EQ(PlanUpdate(table, {same}).action, UpdateAction::kNone);

  LiveOperator rollback{Spec("scale", {1, 0, 0}), Spec("scale", {1, 1, 0})};
  const UpdatePlan flip = PlanUpdate(table, {rollback});
  EXPECT_EQ(flip.action, UpdateAction::kAliasFlip);
  ASSERT_EQ(flip.activate.size(), 1u);
  EXPECT_EQ(flip.activate[0].second, (SemVer{1, 0, 0}));

  LiveOperator publish{Spec("scale", {1, 2, 0}), Spec("scale", {1, 1, 0})};
  const UpdatePlan sw = PlanUpdate(table, {publish});
  EXPECT_EQ(sw.action, UpdateAction::kEpochSwitch);
  ASSERT_EQ(sw.reasons.size(), 1u);
  EXPECT_NE(sw.reasons[0].find("scale 1.2.0"), std::string::npos);

  LiveOperator added{Spec("neg", {1, 0, 0}), std::nullopt};
  EXPECT_EQ(PlanUpdate(table, {same, added}).action, UpdateAction::kEpochSwitch);
}

TEST(UpdatePlanTest, StagedSpecsHoldWantedVersionsAndKeepTheRest) {
  std::vector<registry::OperatorSpec> kept = {Spec("scale", {1, 0, 0}), Spec("scale", {1, 1, 0}),
                                              Spec("neg", {1, 0, 0})};
  LiveOperator publish{Spec("scale", {1, 2, 0}), Spec("scale", {1, 1, 0})};
  const auto staged = StagedSpecs({publish}, kept);
  std::vector<std::string> got;
  for (const auto& s : staged) got.push_back(s.name + "@" + s.version.ToString());
  EXPECT_EQ(got, (std::vector<std::string>{"scale@1.2.0", "scale@1.1.0", "neg@1.0.0"}));
}

// Records what the switch asked of it; fails where told to.
class FakeDevice final : public EpochDevice {
 public:
  Status Prepare(const StagedImage& staged) override {
    calls.push_back("prepare " + staged.image.key);
    return fail_prepare ? InvalidArgument("no slot for scale f32") : Status::Ok();
  }
  Status Quiesce(std::chrono::microseconds) override {
    calls.push_back("quiesce");
    return fail_quiesce ? Unavailable("worker busy") : Status::Ok();
  }
  Status Load(const StagedImage& staged) override {
    calls.push_back("load " + staged.image.key);
    return fail_load ? Internal("cuModuleLoadData failed") : Status::Ok();
  }
  void Commit(StagedImage staged) override {
    calls.push_back("commit " + staged.image.key);
    active = staged.image.key;
  }
  void Resume() override { calls.push_back("resume"); }

  bool fail_prepare = false;
  bool fail_quiesce = false;
  bool fail_load = false;
  std::string active = "old";
  std::vector<std::string> calls;
};

Expected<StagedImage> Staged(const std::string& key) {
  StagedImage staged;
  staged.image.key = key;
  return staged;
}

TEST(EpochSwitchTest, StepsRunInOrder) {
  FakeDevice device;
  auto timing = RunEpochSwitch(
      device, [] { return Staged("new"); }, std::chrono::seconds(1));
  ASSERT_TRUE(timing.ok()) << timing.status().ToString();
  EXPECT_EQ(device.calls, (std::vector<std::string>{"prepare new", "quiesce", "load new",
                                                    "commit new", "resume"}));
  EXPECT_EQ(device.active, "new");
  EXPECT_LE(timing->quiesce_us + timing->load_us + timing->commit_us, timing->gap_us + 1.0);
}

TEST(EpochSwitchTest, AFailedBuildNeverStopsTheService) {
  FakeDevice device;
  auto timing = RunEpochSwitch(
      device, []() -> Expected<StagedImage> { return CompileError("scale.yaml:3: bad body"); },
      std::chrono::seconds(1));
  ASSERT_FALSE(timing.ok());
  EXPECT_EQ(timing.status().code(), StatusCode::kCompileError);
  EXPECT_NE(timing.status().message().find("keeps serving"), std::string::npos);
  EXPECT_NE(timing.status().message().find("scale.yaml:3"), std::string::npos);
  EXPECT_TRUE(device.calls.empty());
  EXPECT_EQ(device.active, "old");
}

TEST(EpochSwitchTest, QuiesceOrLoadFailureKeepsTheActiveImageAndResumes) {
  FakeDevice busy;
  busy.fail_quiesce = true;
  auto a = RunEpochSwitch(
      busy, [] { return Staged("new"); }, std::chrono::seconds(1));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(busy.calls, (std::vector<std::string>{"prepare new", "quiesce", "resume"}));
  EXPECT_EQ(busy.active, "old");

  FakeDevice broken;
  broken.fail_load = true;
  auto b = RunEpochSwitch(
      broken, [] { return Staged("new"); }, std::chrono::seconds(1));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("cuModuleLoadData"), std::string::npos);
  EXPECT_EQ(broken.calls,
            (std::vector<std::string>{"prepare new", "quiesce", "load new", "resume"}));
  EXPECT_EQ(broken.active, "old");
}

TEST(EpochSwitchTest, APreparationFailureNeverStopsTheService) {
  FakeDevice device;
  device.fail_prepare = true;
  auto timing = RunEpochSwitch(
      device, [] { return Staged("new"); }, std::chrono::seconds(1));
  ASSERT_FALSE(timing.ok());
  EXPECT_NE(timing.status().message().find("no slot for scale f32"), std::string::npos);
  EXPECT_NE(timing.status().message().find("keeps serving"), std::string::npos);
  EXPECT_EQ(device.calls, (std::vector<std::string>{"prepare new"}));
  EXPECT_EQ(device.active, "old");
}

}  // namespace
}  // namespace gpuos::runtime
