#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "agentrt/attachments.hpp"
#include "agentrt/error.hpp"

using namespace agentrt;

namespace {

ErrorCode code_of(const auto& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::ok;
}

}  // namespace

TEST_CASE("upload_key places an upload under the user's thread") {
  CHECK(upload_key("u1", "t-2", "up_3.png") == "agent-inputs/u1/t-2/uploads/up_3.png");
  CHECK(upload_key(std::string(128, 'a'), "t", "x") == "agent-inputs/" + std::string(128, 'a') + "/t/uploads/x");
}

TEST_CASE("upload_key refuses ids that could add or climb a path segment") {
  const std::vector<std::string> bads = {"",
                                         ".",
                                         "..",
                                         "...",
                                         ".hidden",
                                         "a/b",
                                         "a\\b",
                                         "a b",
                                         "a%2Fb",
                                         "é",
                                         std::string("a\0b", 3),
                                         std::string(129, 'a'),
                                         "a\n"};
  for (const std::string& bad : bads) {
    CAPTURE(bad);
    CHECK(code_of([&] { upload_key(bad, "t", "x"); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { upload_key("u", bad, "x"); }) == ErrorCode::invalid_argument);
    CHECK(code_of([&] { upload_key("u", "t", bad); }) == ErrorCode::invalid_argument);
  }
  // The one id rule (agentrt/ids.hpp): what names a thread names its uploads' folder too.
  CHECK(upload_key("alice@example.com", "th:1.x_y-Z", "a..b") ==
        "agent-inputs/alice@example.com/th:1.x_y-Z/uploads/a..b");
}

TEST_CASE("the invalid id error names which id was wrong and escapes it") {
  try {
    upload_key("u", "t\x01", "x");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.message() ==
          "thread id 't\\x01' holds a character other than A-Z a-z 0-9 _ - . : @ (ids are 1-128 of A-Z a-z "
          "0-9 _ - . : @, not starting with '.')");
  }
}

TEST_CASE("key_belongs_to accepts only keys under the same user and thread") {
  const std::string key = upload_key("u1", "t1", "abc");
  CHECK(key_belongs_to(key, "u1", "t1"));
  CHECK(key_belongs_to("agent-inputs/u1/t1/audio/clip.wav", "u1", "t1"));
  CHECK_FALSE(key_belongs_to(key, "u2", "t1"));
  CHECK_FALSE(key_belongs_to(key, "u1", "t2"));
  CHECK_FALSE(key_belongs_to("agent-inputs/u1/t10/uploads/abc", "u1", "t1"));
  CHECK_FALSE(key_belongs_to("agent-inputs/u1/t1", "u1", "t1"));
  CHECK_FALSE(key_belongs_to("agent-inputs/u1/t1/", "u1", "t1"));
  CHECK_FALSE(key_belongs_to("agent-inputs/u1/t1/uploads/", "u1", "t1"));
  CHECK_FALSE(key_belongs_to("agent-inputs/u1/t1/../t2/uploads/abc", "u1", "t1"));
  CHECK_FALSE(key_belongs_to("agent-inputs/u1/t1//abc", "u1", "t1"));
  CHECK_FALSE(key_belongs_to("/agent-inputs/u1/t1/uploads/abc", "u1", "t1"));
  CHECK_FALSE(key_belongs_to("other/u1/t1/uploads/abc", "u1", "t1"));
  CHECK_FALSE(key_belongs_to("agent-inputs/u1/t1/uploads/a b", "u1", "t1"));
  // A bad id must not turn into a prefix that matches something else ("u1/t1" as a user id).
  CHECK_FALSE(key_belongs_to("agent-inputs/u1/t1/x/uploads/abc", "u1/t1", "x"));
  CHECK_FALSE(key_belongs_to("agent-inputs/../t1/uploads/abc", "..", "t1"));
}

TEST_CASE("image_ref_id is img_ plus 16 hex digits of sha256(bucket/key)") {
  CHECK(image_ref_id("agent-files", "agent-inputs/u1/t1/uploads/abc") == "img_a83e259635f99c48");
  CHECK(image_ref_id("other", "agent-inputs/u1/t1/uploads/abc") == "img_68065d64d2688da8");
  CHECK(image_ref_id("agent-files", "agent-inputs/u1/t1/uploads/abc") ==
        image_ref_id("agent-files", "agent-inputs/u1/t1/uploads/abc"));
}

TEST_CASE("check_attachment accepts the default types up to 20 MiB") {
  const AttachmentLimits limits;
  CHECK(limits.max_bytes == 20u * 1024 * 1024);
  CHECK(limits.allowed_mime_types.size() == 12);
  for (const auto& type : limits.allowed_mime_types) {
    CAPTURE(type);
    CHECK(code_of([&] { check_attachment(type, limits.max_bytes, limits); }) == ErrorCode::ok);
  }
  CHECK(code_of([] { check_attachment("Text/Plain; charset=UTF-8", 0); }) == ErrorCode::ok);
}

TEST_CASE("check_attachment refuses other types with invalid_argument and large files with too_large") {
  CHECK(code_of([] { check_attachment("image/svg+xml", 10); }) == ErrorCode::invalid_argument);
  CHECK(code_of([] { check_attachment("application/octet-stream", 10); }) == ErrorCode::invalid_argument);
  CHECK(code_of([] { check_attachment("", 10); }) == ErrorCode::invalid_argument);
  CHECK(code_of([] { check_attachment("image/png", 20u * 1024 * 1024 + 1); }) == ErrorCode::too_large);
  // The type is checked first: a disallowed type is refused as such whatever its size.
  CHECK(code_of([] { check_attachment("video/mp4", 1ull << 40); }) == ErrorCode::invalid_argument);
  AttachmentLimits small;
  small.max_bytes = 10;
  small.allowed_mime_types = {"image/png"};
  CHECK(code_of([&] { check_attachment("image/png", 11, small); }) == ErrorCode::too_large);
  CHECK(code_of([&] { check_attachment("image/jpeg", 1, small); }) == ErrorCode::invalid_argument);
  try {
    check_attachment("image/png", 11, small);
  } catch (const Error& e) {
    CHECK(e.message() == "attachment of 11 bytes exceeds the limit of 10 bytes");
  }
}

TEST_CASE("normalize_mime lower-cases and drops parameters") {
  CHECK(normalize_mime(" Text/Plain ; charset=UTF-8") == "text/plain");
  CHECK(normalize_mime("IMAGE/PNG") == "image/png");
  CHECK(normalize_mime("") == "");
}

TEST_CASE("extension_for_mime maps each allowed type and nothing else") {
  CHECK(extension_for_mime("image/png") == ".png");
  CHECK(extension_for_mime("image/jpeg") == ".jpg");
  CHECK(extension_for_mime("image/gif") == ".gif");
  CHECK(extension_for_mime("image/webp") == ".webp");
  CHECK(extension_for_mime("audio/wav") == ".wav");
  CHECK(extension_for_mime("audio/x-wav") == ".wav");
  CHECK(extension_for_mime("audio/mpeg") == ".mp3");
  CHECK(extension_for_mime("audio/mp4") == ".m4a");
  CHECK(extension_for_mime("audio/webm") == ".webm");
  CHECK(extension_for_mime("audio/ogg") == ".ogg");
  CHECK(extension_for_mime("application/pdf") == ".pdf");
  CHECK(extension_for_mime("TEXT/PLAIN; charset=utf-8") == ".txt");
  CHECK(extension_for_mime("image/svg+xml") == "");
  CHECK(extension_for_mime("") == "");
}
