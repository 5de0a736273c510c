// The conversation-document layout's pointer rows in the PostgreSQL store's own database (table
// thread_documents, migration 2), so that processes on several machines share them and its write lock.
#pragma once

#include <memory>
#include <string>

#include "store/document_layout.hpp"
#include "store/postgres/postgres_store.hpp"

namespace agentrt {
inline namespace v1 {
namespace pg {

// The layout's factory (DocumentLayoutOptions::pointers) for a store of `options`' database: each call makes
// pointers on a connection of their own, opened when first used and opened again after it was lost. The write
// lock is a transaction-scoped advisory lock: one commit of a message batch at a time across every process on
// the database, as the SQLite pointer database's BEGIN IMMEDIATE is on one machine.
std::function<std::unique_ptr<DocumentPointers>(bool writer)> document_pointers(const PostgresStoreOptions& options);

}  // namespace pg
}  // namespace v1
}  // namespace agentrt
