// MessageLayout: where a store keeps a thread's history messages, when not as rows of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

// A store that has a layout (SqliteStore) hands it every commit and every messages() read and keeps all
// else itself; the layout reads what else it needs of the batch's outcome (events, turns, ledger rows,
// approvals, jobs) through `store`, the store it belongs to. The store calls it from any thread with none
// of the store's own locks held, so implementations are thread-safe.
class MessageLayout {
 public:
  virtual ~MessageLayout() = default;

  // Store::commit of a non-empty batch. `transact` writes the batch as it then is in the store's one
  // transaction (any messages still in it as the store's own rows: a layout takes its messages out first);
  // the layout calls it at most once. On success the batch's messages are back in it with their thread ids
  // and indexes filled in.
  virtual void commit(Store& store, CommitBatch& batch, const std::function<void(CommitBatch&)>& transact) = 0;
  // Store::messages: the thread's messages in index order.
  virtual std::vector<MessageRecord> messages(Store& store, std::string_view thread_id) = 0;
  // Write transactions the layout committed to databases of its own (part of Store::write_transactions).
  virtual int64_t write_transactions() const = 0;
};

}  // namespace v1
}  // namespace agentrt
