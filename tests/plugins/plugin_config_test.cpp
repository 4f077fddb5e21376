// PluginConfig: the key=value configuration of plugin factories.
#include <gtest/gtest.h>

#include "gpuos/plugins/config.h"

namespace gpuos::plugins {
namespace {

TEST(PluginConfigTest, ParsesEntriesSeparatedBySemicolonsAndNewlines) {
  auto config = PluginConfig::Parse(" budget = 2G ;policy=belady\n# comment\n\nname= two words ;");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->entries().size(), 3u);
  EXPECT_EQ(config->GetString("policy", ""), "belady");
  EXPECT_EQ(config->GetString("name", ""), "two words");
  EXPECT_EQ(config->GetString("absent", "fallback"), "fallback");
  EXPECT_EQ(*config->GetByteSize("budget", 0), 2ull << 30);
  EXPECT_TRUE(config->Has("budget"));
  EXPECT_FALSE(config->Get("absent").has_value());
}

TEST(PluginConfigTest, EmptyTextIsAnEmptyConfig) {
  auto config = PluginConfig::Parse("");
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->entries().empty());
  EXPECT_EQ(*config->GetUint64("n", 7), 7u);
}

TEST(PluginConfigTest, RejectsMalformedEntries) {
  auto no_equals = PluginConfig::Parse("a=1;oops");
  ASSERT_FALSE(no_equals.ok());
  EXPECT_NE(no_equals.status().message().find("entry 2 ('oops')"), std::string::npos);
  auto bad_key = PluginConfig::Parse("a b=1");
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find("key 'a b'"), std::string::npos);
  auto twice = PluginConfig::Parse("a=1;a=2");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("'a' is given twice"), std::string::npos);
  auto empty_key = PluginConfig::Parse("=1");
  EXPECT_FALSE(empty_key.ok());
}

TEST(PluginConfigTest, TypedGettersValidateValues) {
  auto config =
      PluginConfig::Parse("n=-5;u=18446744073709551615;x=0.25;flag=off;size=3M;bad=12abc");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(*config->GetInt64("n", 0), -5);
  EXPECT_EQ(*config->GetUint64("u", 0), 18446744073709551615ull);
  EXPECT_DOUBLE_EQ(*config->GetDouble("x", 0), 0.25);
  EXPECT_FALSE(*config->GetBool("flag", true));
  EXPECT_EQ(*config->GetByteSize("size", 0), 3ull << 20);
  EXPECT_FALSE(config->GetUint64("n", 0).ok()) << "negative is not unsigned";
  EXPECT_FALSE(config->GetInt64("bad", 0).ok());
  EXPECT_FALSE(config->GetBool("x", false).ok());
  EXPECT_FALSE(config->GetByteSize("bad", 0).ok());
  auto huge = PluginConfig::Parse("size=17179869184T");  // 2^34 TiB overflows
  ASSERT_TRUE(huge.ok());
  EXPECT_FALSE(huge->GetByteSize("size", 0).ok());
}

TEST(PluginConfigTest, CheckKeysNamesTheStrangerAndTheAcceptedKeys) {
  auto config = PluginConfig::Parse("aging=1;agin=2");
  ASSERT_TRUE(config.ok());
  Status status = config->CheckKeys({"aging", "order"});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "plugin config key 'agin' is not known; accepted: aging, order");
  EXPECT_TRUE(config->CheckKeys({"aging", "agin"}).ok());
  EXPECT_NE(config->CheckKeys({}).message().find("accepted: (none)"), std::string::npos);
}

}  // namespace
}  // namespace gpuos::plugins
