// The thread routes: history, the caller's threads, deletion.
#include "routes.hpp"

#include "agentrt/records.hpp"
#include "thread_namespace.hpp"

namespace agentrt::server {

// GET /agent/runs/{threadId}/history -> {threadId, messages, state?}
void get_history(ServerContext& s, ApiCall& c) {
  s.own_thread(c, c.match.id);
  json messages = json::array();
  for (auto& m : s.rt->history(c.internal_thread)) messages.push_back(m);  // attachments re-signed by the runtime
  json out = json{{"threadId", c.client_thread}, {"messages", std::move(messages)}};
  if (auto state = s.rt->thread_state(c.internal_thread)) out["state"] = std::move(*state);
  c.send_json(200, out);
}

// GET /agent/threads -> {threads:[{id, title, createdAt, updatedAt, lastSeq}]}: the caller's namespace only.
void get_threads(ServerContext& s, ApiCall& c) {
  json out = json::array();
  for (const auto& t : s.rt->threads(c.user)) {
    auto id = client_thread_id(c.user, t.id);
    if (!id) continue;  // not made through this server's namespaces
    json record = thread_to_json(t);
    record["id"] = *id;
    out.push_back(std::move(record));
  }
  c.send_json(200, json{{"threads", std::move(out)}});
}

// GET /agent/threads/{id}/spend -> {threadId, modelCalls, toolCalls, inputTokens, outputTokens, cost,
// unpricedModels?, usage}: what the thread's turns spent, as committed.
void get_thread_spend(ServerContext& s, ApiCall& c) {
  s.own_thread(c, c.match.id);
  json out = s.rt->thread_spend(c.internal_thread);
  out["threadId"] = c.client_thread;
  c.send_json(200, out);
}

// GET /agent/spend -> the same for every turn of the caller's (deleted threads too).
void get_spend(ServerContext& s, ApiCall& c) { c.send_json(200, json(s.rt->user_spend(c.user))); }

// DELETE /agent/threads/{id}: soft delete (a running or waiting turn is cancelled first).
void delete_thread(ServerContext& s, ApiCall& c) {
  s.own_thread(c, c.match.id);
  // The runtime cancels an active turn first; the store refuses a start on the deleted thread.
  s.rt->delete_thread(c.internal_thread, c.user);
  c.send_json(200, json{{"id", c.client_thread}, {"deleted", true}});
}

}  // namespace agentrt::server
