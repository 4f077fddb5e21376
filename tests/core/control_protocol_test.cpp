#include <gtest/gtest.h>

#include <cstring>

#include "gpuos/control/protocol.h"

namespace gpuos::control {
namespace {

using nlohmann::json;

Request PublishedRequest() {
  Request request;
  request.id = 42;
  request.command = Command::kPublished;
  request.repository = "/srv/ops/repo.db";
  request.operators = {{"add", "1.2.0"}, {"softmax", "0.3.1"}};
  return request;
}

// Strips the 4-byte header after checking it announces the body's length.
std::string BodyOf(const std::string& frame) {
  EXPECT_GE(frame.size(), kFrameHeaderBytes);
  std::array<std::uint8_t, kFrameHeaderBytes> header{};
  std::memcpy(header.data(), frame.data(), kFrameHeaderBytes);
  auto length = DecodeFrameLength(header);
  EXPECT_TRUE(length.ok()) << length.status().ToString();
  EXPECT_EQ(*length, frame.size() - kFrameHeaderBytes);
  return frame.substr(kFrameHeaderBytes);
}

TEST(ControlProtocol, RequestsRoundTripForEveryCommand) {
  Request status;
  status.id = 7;
  status.command = Command::kStatus;
  Request rolled_back = PublishedRequest();
  rolled_back.command = Command::kRolledBack;
  for (const Request& request : {status, PublishedRequest(), rolled_back}) {
    auto frame = EncodeRequestFrame(request);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    auto decoded = DecodeRequest(BodyOf(*frame));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, request) << CommandName(request.command);
  }
  EXPECT_EQ(RequestToJson(PublishedRequest())["command"], "published");
  EXPECT_EQ(RequestToJson(rolled_back)["command"], "rolled_back");
  EXPECT_EQ(RequestToJson(status)["protocol"], kProtocolVersion);
}

TEST(ControlProtocol, ResponsesRoundTrip) {
  Response success = SuccessResponse(3, json{{"image", "abc"}, {"operators", json::array()}});
  Response failure = ErrorResponse(4, NotFound("operator 'x' is not in the repository"));
  EXPECT_EQ(failure.error->code, "not_found");
  for (const Response& response : {success, failure}) {
    auto frame = EncodeResponseFrame(response);
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    auto decoded = DecodeResponse(BodyOf(*frame));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, response);
  }
  EXPECT_TRUE(ResponseToJson(failure)["result"].is_null());
  EXPECT_TRUE(ResponseToJson(success)["error"].is_null());
}

TEST(ControlProtocol, FrameHeaderIsBigEndianLength) {
  auto frame = EncodeFrame(std::string(0x0102, 'x'));
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(static_cast<unsigned char>((*frame)[0]), 0x00);
  EXPECT_EQ(static_cast<unsigned char>((*frame)[1]), 0x00);
  EXPECT_EQ(static_cast<unsigned char>((*frame)[2]), 0x01);
  EXPECT_EQ(static_cast<unsigned char>((*frame)[3]), 0x02);
  EXPECT_EQ(frame->size(), 0x0102u + 4);
}

TEST(ControlProtocol, BadFrameLengthsAreRejected) {
  EXPECT_EQ(EncodeFrame("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeFrame(std::string(101, 'x'), 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(EncodeFrame(std::string(100, 'x'), 100).ok());

  auto zero = DecodeFrameLength({0, 0, 0, 0});
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  auto oversized = DecodeFrameLength({0, 1, 0, 1});  // 65537 > 64 KiB
  EXPECT_EQ(oversized.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(oversized.status().message().find("65537"), std::string::npos)
      << oversized.status().message();
  auto huge = DecodeFrameLength({0xff, 0xff, 0xff, 0xff});
  EXPECT_FALSE(huge.ok());
  auto at_limit = DecodeFrameLength({0, 1, 0, 0});
  ASSERT_TRUE(at_limit.ok());
  EXPECT_EQ(*at_limit, 65536u);
  EXPECT_FALSE(DecodeFrameLength({0, 0, 0, 11}, 10).ok());

  Request big = PublishedRequest();
  big.operators.assign(5000, {"an_operator_name", "10.20.30"});
  EXPECT_EQ(EncodeRequestFrame(big).status().code(), StatusCode::kInvalidArgument);
}

struct MalformedCase {
  const char* name;
  const char* body;
  StatusCode code;
  const char* mentions;  // a word the message must contain
};

class MalformedRequest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedRequest, IsRejectedWithAClearStatus) {
  const MalformedCase& c = GetParam();
  auto decoded = DecodeRequest(c.body);
  ASSERT_FALSE(decoded.ok()) << c.name;
  EXPECT_EQ(decoded.status().code(), c.code) << decoded.status().ToString();
  EXPECT_NE(decoded.status().message().find(c.mentions), std::string::npos)
      << decoded.status().message();
}

const MalformedCase kMalformed[] = {
    {"not_json", "{\"protocol\":1,", StatusCode::kInvalidArgument, "not valid JSON"},
    {"binary", "\x01\x02\xff\xfe", StatusCode::kInvalidArgument, "not valid JSON"},
    {"array", "[1,2]", StatusCode::kInvalidArgument, "object"},
    {"no_protocol", R"({"id":1,"command":"status"})", StatusCode::kInvalidArgument, "protocol"},
    {"protocol_string", R"({"protocol":"1","id":1,"command":"status"})",
     StatusCode::kInvalidArgument, "protocol"},
    {"protocol_2", R"({"protocol":2,"id":1,"command":"status"})", StatusCode::kFailedPrecondition,
     "version 2"},
    {"no_id", R"({"protocol":1,"command":"status"})", StatusCode::kInvalidArgument, "'id'"},
    {"id_string", R"({"protocol":1,"id":"1","command":"status"})", StatusCode::kInvalidArgument,
     "'id'"},
    {"id_float", R"({"protocol":1,"id":1.5,"command":"status"})", StatusCode::kInvalidArgument,
     "'id'"},
    {"no_command", R"({"protocol":1,"id":1})", StatusCode::kInvalidArgument, "command"},
    {"command_number", R"({"protocol":1,"id":1,"command":3})", StatusCode::kInvalidArgument,
     "command"},
    {"unknown_command", R"({"protocol":1,"id":1,"command":"reboot"})", StatusCode::kInvalidArgument,
     "reboot"},
    {"no_repository", R"({"protocol":1,"id":1,"command":"published","operators":[]})",
     StatusCode::kInvalidArgument, "repository"},
    {"empty_repository",
     R"({"protocol":1,"id":1,"command":"published","repository":"","operators":[{"name":"a","version":"1.0.0"}]})",
     StatusCode::kInvalidArgument, "repository"},
    {"operators_object",
     R"({"protocol":1,"id":1,"command":"rolled_back","repository":"r","operators":{}})",
     StatusCode::kInvalidArgument, "operators"},
    {"operators_empty",
     R"({"protocol":1,"id":1,"command":"published","repository":"r","operators":[]})",
     StatusCode::kInvalidArgument, "operators"},
    {"operator_not_object",
     R"({"protocol":1,"id":1,"command":"published","repository":"r","operators":["add"]})",
     StatusCode::kInvalidArgument, "operators[0]"},
    {"operator_no_version",
     R"({"protocol":1,"id":1,"command":"published","repository":"r","operators":[{"name":"add"}]})",
     StatusCode::kInvalidArgument, "version"},
    {"operator_version_number",
     R"({"protocol":1,"id":1,"command":"published","repository":"r","operators":[{"name":"add","version":1}]})",
     StatusCode::kInvalidArgument, "version"},
};

INSTANTIATE_TEST_SUITE_P(AllCases, MalformedRequest, ::testing::ValuesIn(kMalformed),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

TEST(ControlProtocol, MalformedResponsesAreRejected) {
  const char* bodies[] = {
      "nope",
      R"({"ok":true,"error":null,"result":{}})",           // no id
      R"({"id":1,"ok":"yes","error":null,"result":{}})",   // ok not bool
      R"({"id":1,"ok":true,"error":null,"result":null})",  // ok without result
      R"({"id":1,"ok":true,"error":{"code":"x","message":"y"},"result":{}})",
      R"({"id":1,"ok":false,"error":null,"result":null})",  // failure without error
      R"({"id":1,"ok":false,"error":{"code":1,"message":"y"},"result":null})",
  };
  for (const char* body : bodies) {
    auto decoded = DecodeResponse(body);
    EXPECT_FALSE(decoded.ok()) << body;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << body;
  }
}

TEST(ControlProtocol, UnknownFieldsAreIgnored) {
  auto decoded = DecodeRequest(R"({"protocol":1,"id":9,"command":"status","future":true})");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->id, 9);
  EXPECT_EQ(decoded->command, Command::kStatus);
}

}  // namespace
}  // namespace gpuos::control
