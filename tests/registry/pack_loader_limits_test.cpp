// Input limits, hostile input and directory loading.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpuos/registry/pack_loader.h"

namespace gpuos::registry {
namespace {

namespace fs = std::filesystem;

const fs::path kPackData = fs::path(GPUOS_SOURCE_DIR) / "tests/data/packs";

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(GPUOS_BINARY_DIR) / "pack_loader_test" / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string Pack(const std::string& pack_name, const std::string& op_name,
                 const std::string& body = "out = a;") {
  return "gpuos_pack: 1\nname: " + pack_name +
         "\nversion: 1.0.0\noperators:\n  - name: " + op_name +
         "\n    version: 1.0.0\n    kind: elementwise\n    dtypes: [f32]\n"
         "    inputs: [{name: a}]\n    outputs: [{name: out}]\n    body: " +
         body + "\n";
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(PackLimitsTest, RejectsOversizedInput) {
  std::string text = Pack("big.pack", "op") + "# " + std::string(4u << 20, 'x') + "\n";
  auto pack = ParsePack(text, "big.yaml");
  ASSERT_FALSE(pack.ok());
  EXPECT_TRUE(StartsWith(pack.status().message(), "big.yaml:1:1: error: the file is "))
      << pack.status().message();
  EXPECT_NE(pack.status().message().find("4 MiB"), std::string::npos);

  fs::path dir = ScratchDir();
  WriteFile(dir / "big.yaml", text);
  auto file = LoadPackFile((dir / "big.yaml").string());
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("4 MiB"), std::string::npos);
}

TEST(PackLimitsTest, RejectsDeepFlowNestingBeforeParsing) {
  for (std::size_t depth : {65u, 1000u, 200000u}) {
    std::string text = "gpuos_pack: 1\nname: " + std::string(depth, '[') + std::string(depth, ']');
    auto pack = ParsePack(text, "deep.yaml");
    ASSERT_FALSE(pack.ok());
    EXPECT_NE(pack.status().message().find("nest deeper than 64 levels"), std::string::npos)
        << pack.status().message();
    EXPECT_TRUE(StartsWith(pack.status().message(), "deep.yaml:2:")) << pack.status().message();
  }
  // Unterminated brackets and mappings count too.
  auto open = ParsePack("a: " + std::string(100000, '{'), "open.yaml");
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("nest deeper"), std::string::npos);
}

TEST(PackLimitsTest, RejectsDeepBlockNesting) {
  std::string sequences = "gpuos_pack: 1\nname:\n";
  for (int i = 0; i < 100; ++i) sequences += std::string(i, ' ') + "-\n";
  auto pack = ParsePack(sequences, "seq.yaml");
  ASSERT_FALSE(pack.ok());
  EXPECT_NE(pack.status().message().find("nest deeper"), std::string::npos)
      << pack.status().message();

  std::string dashes = "x:\n" + [] {
    std::string line;
    for (int i = 0; i < 100; ++i) line += "- ";
    return line;
  }() + "a\n";
  auto compact = ParsePack(dashes, "dashes.yaml");
  ASSERT_FALSE(compact.ok());
  EXPECT_NE(compact.status().message().find("nest deeper"), std::string::npos);

  std::string mappings;
  for (int i = 0; i < 100; ++i) mappings += std::string(i, ' ') + "k:\n";
  auto nested = ParsePack(mappings, "map.yaml");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("nest deeper"), std::string::npos);
}

TEST(PackLimitsTest, BracketsInCodeAndStringsAreNotNesting) {
  std::string braces = std::string(200, '{') + std::string(200, '}');
  std::string text = Pack("code.pack", "op", "|\n      " + braces + "\n      out = a;") +
                     "    description: \"" + std::string(100, '[') + "\"\n" + "    device_code: '" +
                     std::string(100, '{') + "'\n";
  auto pack = ParsePack(text, "code.yaml");
  ASSERT_TRUE(pack.ok()) << pack.status().ToString();
  EXPECT_EQ(pack->operators[0].body.code, braces + "\nout = a;\n");
  // A plain scalar may hold brackets after its first character.
  auto plain = ParsePack(Pack("plain.pack", "op",
                              "out = a[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                              "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0];"),
                         "plain.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
}

TEST(PackLimitsTest, GarbageNeverThrows) {
  const std::string inputs[] = {
      std::string("\0\1\2\3", 4),
      "\xff\xfe\x00\x01",
      "{",
      "]",
      "- - - -",
      "&a [*a]",
      "*x",
      "!!binary AAAA",
      "gpuos_pack: !!int x",
      "? [a]: b",
      "gpuos_pack: 1\n? [a]\n: b\n",
      "gpuos_pack: 99999999999999999999999",
      "gpuos_pack: 1\nname: a\nversion: 1.0.0\n"
      "operators:\n  - &op {name: x}\n  - *op\n",
      "%YAML 1.2\n---\n",
      "'unterminated",
      "key: \"\\u12\"",
      "\t\t- a",
      // Inputs on which yaml-cpp 0.7's LoadAll loops forever.
      ",",
      ",a",
      "{a: 1},",
      "# expect: [1, 2]}]!$\n",
  };
  for (const std::string& input : inputs) {
    auto pack = ParsePack(input, "junk.yaml");
    EXPECT_FALSE(pack.ok()) << input;
    if (!pack.ok()) {
      EXPECT_TRUE(StartsWith(pack.status().message(), "junk.yaml:")) << pack.status().message();
      EXPECT_NE(pack.status().message().find(": error: "), std::string::npos);
    }
  }
}

TEST(PackLimitsTest, RejectsBytesThatAreNotUtf8Text) {
  const std::pair<std::string, std::string> cases[] = {{"\x8c", "0x8C"},
                                                       {"\xc3(", "0xC3"},
                                                       {"\xc0\x80", "0xC0"},
                                                       {"\xed\xa0\x80", "0xED"},
                                                       {std::string(1, '\0'), "0x00"},
                                                       {"\x1b[0m", "0x1B"}};
  for (const auto& [bytes, shown] : cases) {
    auto pack = ParsePack(Pack("utf.pack", "op", "out = a; // ab" + bytes), "u.yaml");
    ASSERT_FALSE(pack.ok()) << shown;
    EXPECT_TRUE(StartsWith(pack.status().message(), "u.yaml:11:25: error: byte " + shown))
        << pack.status().message();
  }
  auto accented = ParsePack(
      Pack("utf.pack", "op", "out = a; // \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
      "u.yaml");
  EXPECT_TRUE(accented.ok()) << accented.status().ToString();
  // An escape in a quoted string cannot smuggle a NUL into code either.
  auto escaped = ParsePack(Pack("utf.pack", "op", "\"out = a;\\0\""), "u.yaml");
  ASSERT_FALSE(escaped.ok());
  EXPECT_TRUE(StartsWith(escaped.status().message(),
                         "u.yaml:11:11: error: operators[0].body: contains a NUL"))
      << escaped.status().message();
}

TEST(PackLimitsTest, OneDocumentPerFile) {
  std::string pack = Pack("docs.pack", "op");
  auto explicit_start = ParsePack("%YAML 1.2\n# comment\n---\n" + pack + "...\n# end\n", "d.yaml");
  EXPECT_TRUE(explicit_start.ok()) << explicit_start.status().ToString();
  for (const std::string& text :
       {pack + "---\n" + pack, pack + "...\nname: x\n", "---\n---\n" + pack, pack + "--- \n"}) {
    auto two = ParsePack(text, "d.yaml");
    ASSERT_FALSE(two.ok()) << text;
    EXPECT_NE(two.status().message().find("one YAML document"), std::string::npos)
        << two.status().message();
  }
  // "---" inside code is not a document marker.
  auto in_code =
      ParsePack(Pack("docs.pack", "op", "|\n      out = a;\n      ---x;\n      --- y"), "d.yaml");
  EXPECT_TRUE(in_code.ok()) << in_code.status().ToString();
}

TEST(PackFilesTest, MissingFileAndDirectoryAreNamed) {
  fs::path missing = fs::path(GPUOS_BINARY_DIR) / "no/such/pack.yaml";
  auto file = LoadPackFile(missing.string());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(StartsWith(file.status().message(), missing.string() + ": error: "));
  auto path = LoadPackPath(missing.string());
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), StatusCode::kNotFound);

  fs::path dir = ScratchDir();
  auto directory = LoadPackFile(dir.string());
  ASSERT_FALSE(directory.ok());
  EXPECT_TRUE(StartsWith(directory.status().message(), dir.string() + ": error: is a directory"));
}

TEST(PackFilesTest, LoadsDirectorySortedByName) {
  auto packs = LoadPackPath((kPackData / "good").string());
  ASSERT_TRUE(packs.ok()) << packs.status().ToString();
  std::vector<std::string> names;
  for (const auto& pack : *packs) names.push_back(pack.name);
  EXPECT_EQ(names, (std::vector<std::string>{"test.custom", "test.elementwise", "test.reductions",
                                             "acme.activations"}));
  EXPECT_EQ((*packs)[0].source_path, (kPackData / "good/custom.yaml").string());
}

TEST(PackFilesTest, LoadsOneFileAsAList) {
  auto packs = LoadPackPath((kPackData / "good/reduction.yaml").string());
  ASSERT_TRUE(packs.ok()) << packs.status().ToString();
  ASSERT_EQ(packs->size(), 1u);
  EXPECT_EQ((*packs)[0].name, "test.reductions");
}

TEST(PackFilesTest, DirectoryTakesOnlyYamlFilesAtTopLevel) {
  fs::path dir = ScratchDir();
  WriteFile(dir / "b.yml", Pack("pack.b", "op_b"));
  WriteFile(dir / "a.yaml", Pack("pack.a", "op_a"));
  WriteFile(dir / "notes.txt", "not yaml");
  WriteFile(dir / "c.yaml.bak", "broken: [");
  fs::create_directories(dir / "sub.yaml");
  fs::create_directories(dir / "nested");
  WriteFile(dir / "nested/d.yaml", "broken: [");
  auto packs = LoadPackPath(dir.string());
  ASSERT_TRUE(packs.ok()) << packs.status().ToString();
  ASSERT_EQ(packs->size(), 2u);
  EXPECT_EQ((*packs)[0].name, "pack.a");
  EXPECT_EQ((*packs)[1].name, "pack.b");
}

TEST(PackFilesTest, EmptyDirectoryIsAnError) {
  fs::path dir = ScratchDir();
  WriteFile(dir / "readme.md", "nothing");
  auto packs = LoadPackPath(dir.string());
  ASSERT_FALSE(packs.ok());
  EXPECT_EQ(packs.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(StartsWith(packs.status().message(), dir.string() + ": error: no pack files"));
}

TEST(PackFilesTest, DuplicatePackNamesAcrossFiles) {
  fs::path dir = ScratchDir();
  WriteFile(dir / "one.yaml", Pack("same.name", "op_one"));
  WriteFile(dir / "two.yaml", "# second\n" + Pack("same.name", "op_two"));
  auto packs = LoadPackPath(dir.string());
  ASSERT_FALSE(packs.ok());
  EXPECT_EQ(packs.status().code(), StatusCode::kInvalidArgument);
  const std::string message = packs.status().message();
  EXPECT_TRUE(StartsWith(message, (dir / "two.yaml").string() +
                                      ":3:7: error: name: pack "
                                      "'same.name' is also defined in " +
                                      (dir / "one.yaml").string() + ":2:7"))
      << message;
}

TEST(PackFilesTest, DuplicateOperatorNamesAcrossPacks) {
  fs::path dir = ScratchDir();
  WriteFile(dir / "one.yaml", Pack("pack.one", "relu"));
  WriteFile(dir / "two.yaml", Pack("pack.two", "relu"));
  auto packs = LoadPackPath(dir.string());
  ASSERT_FALSE(packs.ok());
  const std::string message = packs.status().message();
  EXPECT_TRUE(StartsWith(message, (dir / "two.yaml").string() +
                                      ":5:11: error: operators[0].name: operator 'relu' is also "
                                      "defined in pack 'pack.one' (" +
                                      (dir / "one.yaml").string() + ":5:11)"))
      << message;
}

TEST(PackFilesTest, ErrorInOneFileNamesThatFile) {
  fs::path dir = ScratchDir();
  WriteFile(dir / "a.yaml", Pack("pack.a", "op_a"));
  WriteFile(dir / "b.yaml", ReadFile(kPackData / "bad/format_too_new.yaml"));
  auto packs = LoadPackPath(dir.string());
  ASSERT_FALSE(packs.ok());
  EXPECT_TRUE(StartsWith(packs.status().message(), (dir / "b.yaml").string() + ":"))
      << packs.status().message();
}

}  // namespace
}  // namespace gpuos::registry
