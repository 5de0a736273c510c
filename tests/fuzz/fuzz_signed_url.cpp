// Signed-URL verification (FsObjectStore::verify_url, src/store/fs_object_store.*): any text is refused with
// Error(invalid_argument) or Error(expired), or grants a key; a URL the store signed for a key grants exactly
// that key until it expires, then Error(expired); a signature changed in one place grants nothing.
#include <cstdint>
#include <memory>
#include <string>

#include "agentrt/error.hpp"
#include "fuzz_support.hpp"
#include "store/fs_object_store.hpp"

using namespace agentrt;

namespace {

[[noreturn]] void broken(const std::string& what) { agentrt_fuzz::broken("signed_url", what); }

FsObjectStore& store() {
  static agentrt_fuzz::ScratchDir dir("signed-url");
  static FsObjectStore s([] {
    FsObjectStoreOptions o;
    o.root = dir.file("objects");
    o.bucket = "agentrt";
    o.signing_secret = "fuzz-secret";
    o.public_base_url = "http://127.0.0.1:8080/api/v1/objects";
    return o;
  }());
  return s;
}

constexpr int64_t kNow = 1700000000000;

// The key the URL grants, or the code it is refused with.
std::pair<std::string, ErrorCode> verify(std::string_view url, int64_t now) {
  try {
    return {store().verify_url(url, now), ErrorCode::ok};
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument && e.code() != ErrorCode::expired)
      broken(std::string("verify_url failed with another code: ") + e.what());
    return {"", e.code()};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text = agentrt_fuzz::text_of(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    auto [key, code] = verify(text, kNow);
    if (code == ErrorCode::ok) {
      // A URL that verifies names a valid key, and is one the store would sign for it (in some spelling).
      try {
        validate_object_key(key);
      } catch (const Error&) {
        broken("verify_url granted an invalid key: " + key);
      }
    }
    return 0;
  }
  // The text as a key: sign, verify, expire, tamper.
  std::string url;
  try {
    url = store().sign_url(text, kNow + 1000);
  } catch (const Error&) {
    return 0;  // not a key
  }
  auto [key, code] = verify(url, kNow);
  if (code != ErrorCode::ok || key != text) broken("a signed URL does not grant its key: " + url);
  if (verify(url, kNow + 1000).second != ErrorCode::expired) broken("a signed URL outlived its expiry: " + url);
  const size_t sig = url.rfind("sig=");
  if (sig == std::string::npos || sig + 4 >= url.size()) broken("a signed URL without a signature: " + url);
  std::string tampered = url;
  const size_t at = sig + 4 + data[0] % (url.size() - sig - 4);
  tampered[at] = tampered[at] == '0' ? '1' : '0';
  if (verify(tampered, kNow).second == ErrorCode::ok) broken("a tampered signature was accepted: " + tampered);
  return 0;
}
