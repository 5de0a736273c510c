#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "agentrt/scripted_model.hpp"

using namespace agentrt;

namespace {
ModelRequest request_of(const std::vector<std::pair<Role, std::string>>& messages) {
  ModelRequest req;
  for (const auto& [role, content] : messages) {
    Message m;
    m.role = role;
    m.content = content;
    req.messages.push_back(m);
  }
  return req;
}
}  // namespace

TEST_CASE("scripted model helpers: the latest tool result counts only after the last user message") {
  const auto answered = request_of({{Role::user, "book"},
                                    {Role::assistant, ""},
                                    {Role::tool, "first"},
                                    {Role::tool, "second"},
                                    {Role::assistant, "thinking"}});
  const Message* tool = last_tool_result_since_last_user(answered);
  REQUIRE(tool != nullptr);
  CHECK(tool->content == "second");
  CHECK(tool_results_since_last_user(answered) == 2);

  const auto asked_again = request_of({{Role::user, "book"}, {Role::tool, "old"}, {Role::user, "again"}});
  CHECK(last_tool_result_since_last_user(asked_again) == nullptr);
  CHECK(tool_results_since_last_user(asked_again) == 0);
  CHECK(last_tool_result_since_last_user(ModelRequest{}) == nullptr);
}
