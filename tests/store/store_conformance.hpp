// The Store conformance suite: what every Store backend must do, written against the interface only.
// A backend's test calls run_store_conformance with a factory that makes a fresh, empty store.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "agentrt/error.hpp"
#include "agentrt/events.hpp"
#include "agentrt/storage.hpp"

namespace agentrt::testing {

inline TurnRecord conformance_turn(const std::string& id, const std::string& thread, TurnStatus status,
                                   const std::string& client = {}) {
  TurnRecord t;
  t.id = id;
  t.thread_id = thread;
  t.user_id = "u1";
  t.status = status;
  t.client_message_id = client;
  t.run_id = "run_" + id;
  t.stage = "execution";
  t.owner = "rt_a";
  return t;
}

// A book_room call of turn `t` (run "run_<turn id>").
inline LedgerEntry conformance_call(const TurnRecord& t, const std::string& call_id, const std::string& arguments,
                                    LedgerStatus status) {
  LedgerEntry l;
  l.tool_call_id = call_id;
  l.turn_id = t.id;
  l.thread_id = t.thread_id;
  l.run_id = t.run_id;
  l.tool_name = "book_room";
  l.arguments = arguments;
  l.status = status;
  return l;
}

inline CommitBatch new_turn_batch(const TurnRecord& t) {
  CommitBatch b;
  b.thread_id = t.thread_id;
  b.create_thread = ThreadRecord{t.thread_id, t.user_id, "", false, 0, 0, 0};
  b.turn = t;
  b.expected_version = -1;
  Message m;
  m.id = "m_" + t.id;
  m.content = "hi";
  b.messages.push_back(MessageRecord{t.thread_id, 0, t.id, t.run_id, m});
  b.events.push_back(StoredEvent{0, t.run_id, to_json_string(events::run_started(t.thread_id, t.run_id))});
  return b;
}

inline void run_store_conformance(const std::function<std::shared_ptr<Store>()>& make) {
  SUBCASE("a commit assigns consecutive sequence numbers and message indexes per thread") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::running));
    b.events.push_back(StoredEvent{0, "run_t1", to_json_string(events::step_started("intent"))});
    s->commit(b);
    CHECK(b.events[0].seq == 1);
    CHECK(b.events[1].seq == 2);
    CHECK(b.messages[0].index == 0);
    CHECK(b.turn->version == 0);
    CommitBatch b2;
    b2.thread_id = "th1";
    b2.events.push_back(StoredEvent{0, "run_t1", to_json_string(events::step_finished("intent"))});
    s->commit(b2);
    CHECK(b2.events[0].seq == 3);
    auto evs = s->events_after("th1", 0, 100);
    REQUIRE(evs.size() == 3);
    CHECK(evs[2].seq == 3);
    CHECK(json::parse(evs[2].json)["stepName"] == "intent");
    CHECK(s->events_after("th1", 2, 100).size() == 1);
    CHECK(s->events_after("th1", 1, 1).size() == 1);
    CHECK(s->events_after("th1", 1, 1)[0].seq == 2);
    CHECK(s->events_after("other", 0, 100).empty());
    CHECK(s->get_thread("th1")->last_seq == 3);
  }
  SUBCASE("thread_messages() gives messages()' messages, in order, and only the thread's") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("tm1", "th_msgs", TurnStatus::running));
    for (int i = 0; i < 3; ++i) {
      Message m;
      m.id = "msg_extra_" + std::to_string(i);
      m.role = i % 2 ? Role::assistant : Role::tool;
      m.content = "content " + std::to_string(i);
      if (m.role == Role::tool) m.tool_call_id = "call_" + std::to_string(i);
      m.metadata = json{{"k", i}, {"nested", {{"a", json::array({1, "x", nullptr})}}}};
      b.messages.push_back(MessageRecord{"th_msgs", 0, "tm1", "run_tm1", m});
    }
    s->commit(b);
    auto other = new_turn_batch(conformance_turn("tm2", "th_msgs_other", TurnStatus::running));
    s->commit(other);
    const auto records = s->messages("th_msgs");
    const auto messages = s->thread_messages("th_msgs");
    REQUIRE(records.size() == 4);
    REQUIRE(messages.size() == records.size());
    for (size_t i = 0; i < records.size(); ++i)
      CHECK(to_json_string(messages[i]) == to_json_string(records[i].message));
    CHECK(messages[3].metadata["nested"]["a"][1] == "x");
    CHECK(s->thread_messages("th_msgs_other").size() == 1);
    CHECK(s->thread_messages("no such thread").empty());
  }
  SUBCASE("a thread's state is written whole with its batch, and a refused batch leaves the last one") {
    auto s = make();
    CHECK_FALSE(s->thread_state("th_state").has_value());
    auto b = new_turn_batch(conformance_turn("ts1", "th_state", TurnStatus::running));
    b.thread_state = R"({"theme":"dark","items":[1,2]})";
    s->commit(b);
    CHECK(s->thread_state("th_state") == std::optional<std::string>(R"({"theme":"dark","items":[1,2]})"));
    CommitBatch only;  // a batch with nothing but the state
    only.thread_id = "th_state";
    only.thread_state = std::string(70000, 'x');  // text as given, longer than a page
    CHECK_FALSE(only.empty());
    s->commit(only);
    CHECK(s->thread_state("th_state")->size() == 70000);
    // A batch the store refuses (a second active turn) leaves the state it had.
    auto refused = new_turn_batch(conformance_turn("ts2", "th_state", TurnStatus::running));
    refused.thread_state = "{}";
    CHECK_THROWS_AS(s->commit(refused), Error);
    CHECK(s->thread_state("th_state")->size() == 70000);
    CHECK_FALSE(s->thread_state("other").has_value());
  }

  SUBCASE("a second active turn on a thread is a conflict and nothing of its batch is written") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::waiting_approval));
    s->commit(b);
    auto b2 = new_turn_batch(conformance_turn("t2", "th1", TurnStatus::running));
    try {
      s->commit(b2);
      FAIL("second active turn accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::conflict);
    }
    CHECK(s->messages("th1").size() == 1);
    CHECK(s->events_after("th1", 0, 10).size() == 1);
    CHECK_FALSE(s->get_turn("t2"));
    CHECK(s->active_turn("th1")->id == "t1");
    // A turn waiting for client tool answers is active too.
    auto c = new_turn_batch(conformance_turn("t3", "th2", TurnStatus::waiting_client));
    s->commit(c);
    auto c2 = new_turn_batch(conformance_turn("t4", "th2", TurnStatus::running));
    CHECK_THROWS_AS(s->commit(c2), Error);
    CHECK(s->active_turn("th2")->status == TurnStatus::waiting_client);
    CHECK(s->turns_in_status(TurnStatus::waiting_client).size() == 1);
  }
  SUBCASE("a repeated client message id on a thread is a conflict; the turn is found by it") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::completed, "cm1"));
    s->commit(b);
    auto b2 = new_turn_batch(conformance_turn("t2", "th1", TurnStatus::running, "cm1"));
    CHECK_THROWS_AS(s->commit(b2), Error);
    CHECK(s->find_turn_by_client_message("th1", "cm1")->id == "t1");
    CHECK_FALSE(s->find_turn_by_client_message("th1", "cm2"));
  }
  SUBCASE("a turn update is a compare-and-set on its version") {
    auto s = make();
    auto t = conformance_turn("t1", "th1", TurnStatus::running);
    t.trace = "inserted";
    auto b = new_turn_batch(t);
    s->commit(b);
    CHECK(s->get_turn("t1")->trace == "inserted");
    CommitBatch up;
    up.thread_id = "th1";
    t.status = TurnStatus::waiting_approval;
    t.interrupts = json::array({json{{"id", "int_1"}, {"reason", "tool_call"}}});
    t.trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 0102030405060708 1700000000000000001";
    up.turn = t;
    up.expected_version = 0;
    s->commit(up);
    CHECK(up.turn->version == 1);
    auto got = s->get_turn("t1");
    CHECK(got->status == TurnStatus::waiting_approval);
    CHECK(got->version == 1);
    CHECK(got->interrupts[0]["id"] == "int_1");
    CHECK(got->trace == t.trace);
    CommitBatch stale;
    stale.thread_id = "th1";
    stale.turn = t;
    stale.expected_version = 0;
    stale.events.push_back(StoredEvent{0, "r", to_json_string(events::step_started("x"))});
    try {
      s->commit(stale);
      FAIL("stale version accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::conflict);
    }
    CHECK(s->events_after("th1", 0, 10).size() == 1);  // all or nothing
    CHECK(s->turns_in_status(TurnStatus::waiting_approval).size() == 1);
    // An update that ends the turn (it leaves the active ones) writes every field too.
    CommitBatch end;
    end.thread_id = "th1";
    t.status = TurnStatus::completed;
    t.trace.clear();
    end.turn = t;
    end.expected_version = 1;
    s->commit(end);
    CHECK(s->get_turn("t1")->status == TurnStatus::completed);
    CHECK(s->get_turn("t1")->trace.empty());
  }
  SUBCASE("concurrent compare-and-sets: exactly one wins") {
    auto s = make();
    auto t = conformance_turn("t1", "th1", TurnStatus::waiting_approval);
    auto b = new_turn_batch(t);
    s->commit(b);
    std::atomic<int> wins{0}, conflicts{0};
    std::vector<std::thread> ths;
    for (int i = 0; i < 8; ++i)
      ths.emplace_back([&, i] {
        CommitBatch up;
        up.thread_id = "th1";
        TurnRecord mine = t;
        mine.status = TurnStatus::resuming;
        mine.owner = "rt_" + std::to_string(i);
        up.turn = mine;
        up.expected_version = 0;
        try {
          s->commit(up);
          ++wins;
        } catch (const Error& e) {
          if (e.code() == ErrorCode::conflict) ++conflicts;
        }
      });
    for (auto& th : ths) th.join();
    CHECK(wins == 1);
    CHECK(conflicts == 7);
  }
  SUBCASE("turn_snapshot() gives a waiting turn, its ledger and its thread's history and state as the reads apart do") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("ts_snap", "th_snap", TurnStatus::waiting_approval));
    b.turn->interrupts = json::array({json{{"id", "int_c1"}, {"reason", "tool_call"}, {"toolCallId", "c1"}}});
    b.turn->approval_request_id = "apr_snap";
    LedgerEntry l = conformance_call(*b.turn, "c1", R"({"room":"A1"})", LedgerStatus::requested);
    l.interrupt_id = "int_c1";
    b.ledger.push_back(l);
    b.thread_state = R"({"cart":[1]})";
    s->commit(b);
    auto other = new_turn_batch(conformance_turn("ts_other", "th_snap_other", TurnStatus::running));
    other.thread_state = "{}";
    s->commit(other);

    const auto snap = s->turn_snapshot("ts_snap");
    REQUIRE(snap.turn);
    CHECK(snap.turn->status == TurnStatus::waiting_approval);
    CHECK(snap.turn->approval_request_id == "apr_snap");
    CHECK(snap.turn->interrupts == s->get_turn("ts_snap")->interrupts);
    CHECK(snap.turn->version == s->get_turn("ts_snap")->version);
    REQUIRE(snap.ledger.size() == 1);
    CHECK(snap.ledger[0].tool_call_id == "c1");
    CHECK(snap.ledger[0].interrupt_id == "int_c1");
    CHECK(snap.ledger[0].arguments == R"({"room":"A1"})");
    const auto records = s->messages("th_snap");
    REQUIRE(snap.history.size() == records.size());
    REQUIRE(snap.history.size() == 1);
    CHECK(snap.history[0].index == records[0].index);
    CHECK(to_json_string(snap.history[0].message) == to_json_string(records[0].message));
    CHECK(snap.thread_state == std::optional<std::string>(R"({"cart":[1]})"));

    const auto none = s->turn_snapshot("no_such_turn");
    CHECK_FALSE(none.turn);
    CHECK(none.ledger.empty());
    CHECK(none.history.empty());
    CHECK_FALSE(none.thread_state);
    // A thread without a state: nullopt, as thread_state() gives it.
    auto bare = new_turn_batch(conformance_turn("ts_bare", "th_bare", TurnStatus::waiting_client));
    s->commit(bare);
    const auto bare_snap = s->turn_snapshot("ts_bare");
    REQUIRE(bare_snap.turn);
    CHECK(bare_snap.ledger.empty());
    CHECK(bare_snap.history.size() == 1);
    CHECK_FALSE(bare_snap.thread_state);
    // A turn that does not wait: the turn alone (a resume of it goes no further than the turn).
    const auto running = s->turn_snapshot("ts_other");
    REQUIRE(running.turn);
    CHECK(running.turn->status == TurnStatus::running);
    CHECK(running.history.empty());
    CHECK_FALSE(running.thread_state);
  }
  SUBCASE("ledger entries are upserted by turn and tool call; approvals are insert-once") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::running));
    LedgerEntry l = conformance_call(*b.turn, "c1", "{}", LedgerStatus::started);
    b.ledger.push_back(l);
    LedgerEntry client = l;  // a client tool's call: the flag round-trips
    client.tool_call_id = "c2";
    client.status = LedgerStatus::requested;
    client.client = true;
    b.ledger.push_back(client);
    s->commit(b);
    CommitBatch b2;
    b2.thread_id = "th1";
    l.status = LedgerStatus::finished;
    l.output = R"({"status":"succeeded"})";
    b2.ledger.push_back(l);
    b2.approval = ApprovalRecord{"apr_1", "t1", "th1", json::array(), json{{"status", "accepted"}}, 0};
    s->commit(b2);
    auto got = s->ledger("t1");
    REQUIRE(got.size() == 2);
    CHECK(got[1].client);
    CHECK(got[1].status == LedgerStatus::requested);
    CHECK_FALSE(got[0].client);
    CHECK(got[0].status == LedgerStatus::finished);
    CHECK(got[0].output == R"({"status":"succeeded"})");
    CHECK(s->get_approval("apr_1")->answer["status"] == "accepted");
    CommitBatch b3;
    b3.thread_id = "th1";
    b3.approval = ApprovalRecord{"apr_1", "t1", "th1", json::array(), json{{"status", "other"}}, 0};
    CHECK_THROWS_AS(s->commit(b3), Error);
    CHECK(s->get_approval("apr_1")->answer["status"] == "accepted");
  }
  SUBCASE("threads belong to one user, list newest first and soft delete") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::completed));
    s->commit(b);
    auto other = new_turn_batch(conformance_turn("t2", "th1", TurnStatus::completed));
    other.create_thread->user_id = "intruder";
    other.turn->user_id = "intruder";
    CHECK_THROWS_AS(s->commit(other), Error);
    auto b3 = new_turn_batch(conformance_turn("t3", "th2", TurnStatus::completed));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    s->commit(b3);
    auto list = s->list_threads("u1");
    REQUIRE(list.size() == 2);
    CHECK(list[0].id == "th2");
    s->soft_delete_thread("th2");
    CHECK(s->list_threads("u1").size() == 1);
    CHECK(s->list_threads("u1", true).size() == 2);
    CHECK(s->get_thread("th2")->deleted);
    CHECK_THROWS_AS(s->soft_delete_thread("nope"), Error);
    s->set_thread_title("th1", "Trip");
    CHECK(s->get_thread("th1")->title == "Trip");
  }
  SUBCASE("instance heartbeats") {
    auto s = make();
    CHECK_FALSE(s->instance_heartbeat("rt_x"));
    s->heartbeat("rt_x", 1000);
    s->heartbeat("rt_x", 2000);
    CHECK(*s->instance_heartbeat("rt_x") == 2000);
    s->remove_instance("rt_x");
    CHECK_FALSE(s->instance_heartbeat("rt_x"));
  }
  SUBCASE("many events in one commit keep their order and their text exactly") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::running));
    for (int i = 0; i < 1000; ++i)
      b.events.push_back(
          StoredEvent{0, "run_t1", to_json_string(events::text_content("m", "d" + std::to_string(i) + " é\"\\"))});
    s->commit(b);
    auto evs = s->events_after("th1", 0, 5000);
    REQUIRE(evs.size() == 1001);
    for (int i = 0; i < 1000; ++i) CHECK(json::parse(evs[i + 1].json)["delta"] == "d" + std::to_string(i) + " é\"\\");
    auto mid = s->events_after("th1", 500, 10);
    REQUIRE(mid.size() == 10);
    CHECK(mid[0].seq == 501);
  }
  SUBCASE("turns_expired: the waiting turns whose deadline has passed, nothing else") {
    auto s = make();
    auto add = [&](const std::string& id, TurnStatus st, int64_t expires) {
      auto t = conformance_turn(id, "th_" + id, st);
      t.expires_at = expires;
      auto b = new_turn_batch(t);
      s->commit(b);
    };
    add("w_past", TurnStatus::waiting_approval, 1000);
    add("w_now", TurnStatus::waiting_approval, 2000);
    add("w_later", TurnStatus::waiting_approval, 3000);
    add("w_none", TurnStatus::waiting_approval, 0);
    add("r_past", TurnStatus::running, 1000);
    add("c_past", TurnStatus::completed, 1000);
    add("wc_past", TurnStatus::waiting_client, 1500);  // waiting for client tool answers: the same deadline
    auto due = s->turns_expired(2000);
    std::vector<std::string> ids;
    for (const auto& t : due) ids.push_back(t.id);
    std::sort(ids.begin(), ids.end());
    CHECK(ids == std::vector<std::string>{"w_now", "w_past", "wc_past"});
    CHECK(s->turns_expired(999).empty());
    REQUIRE(s->turns_expired(5000).size() == 4);
  }
  SUBCASE("jobs: insert, compare-and-set, due ones, and require_idle") {
    auto s = make();
    auto b = new_turn_batch(conformance_turn("t1", "th1", TurnStatus::running));
    JobRecord j;
    j.id = "job_1";
    j.thread_id = "th1";
    j.turn_id = "t1";
    j.run_id = "run_t1";
    j.tool_call_id = "call_1";
    j.tool_name = "render";
    j.user_id = "u1";
    j.status = JobStatus::running;
    j.progress = 0.25;
    j.message = "rendering é";
    j.metadata = json{{"ext", 7}};
    j.expires_at = 5000;
    j.timeout_ms = 4000;
    b.jobs.push_back(JobWrite{j, -1});
    s->commit(b);
    CHECK(b.jobs[0].job.version == 0);
    auto got = s->get_job("job_1");
    REQUIRE(got);
    CHECK(got->status == JobStatus::running);
    CHECK(got->progress == doctest::Approx(0.25));
    CHECK(got->message == "rendering é");
    CHECK(got->metadata["ext"] == 7);
    CHECK(got->timeout_ms == 4000);
    CHECK(got->expires_at == 5000);
    CHECK(got->result.is_null());
    CHECK(got->assets == json::array());
    CHECK(got->created_at > 0);
    CHECK_FALSE(got->delivered);
    CHECK_FALSE(s->get_job("job_2"));
    // A repeated id is a conflict; a stale version too; nothing of the batch is written then.
    CommitBatch dup;
    dup.thread_id = "th1";
    dup.jobs.push_back(JobWrite{j, -1});
    dup.events.push_back(StoredEvent{0, "run_x", to_json_string(events::step_started("x"))});
    CHECK_THROWS_AS(s->commit(dup), Error);
    CHECK(s->events_after("th1", 0, 100).size() == 1);
    JobRecord done = *got;
    done.status = JobStatus::succeeded;
    done.result = json{{"url", "u"}};
    done.assets = json::array({"a"});
    CommitBatch up;
    up.thread_id = "th1";
    up.jobs.push_back(JobWrite{done, 0});
    s->commit(up);
    CHECK(up.jobs[0].job.version == 1);
    CommitBatch stale;
    stale.thread_id = "th1";
    stale.jobs.push_back(JobWrite{done, 0});
    try {
      s->commit(stale);
      FAIL("stale job version accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::conflict);
    }
    CHECK(s->get_job("job_1")->result["url"] == "u");
    // Due: finished and not delivered; open and past its deadline (not while waiting for a confirmation).
    auto due = s->jobs_due(1000);
    REQUIRE(due.size() == 1);
    CHECK(due[0].id == "job_1");
    JobRecord open = j;
    open.id = "job_2";
    open.expires_at = 2000;
    JobRecord pending = j;
    pending.id = "job_3";
    pending.expires_at = 1500;
    pending.confirmation = JobConfirmation::pending;
    CommitBatch more;
    more.thread_id = "th1";
    more.jobs.push_back(JobWrite{open, -1});
    more.jobs.push_back(JobWrite{pending, -1});
    s->commit(more);
    CHECK(s->jobs_due(1999).size() == 1);
    CHECK(s->jobs_due(2000).size() == 2);
    auto all = s->thread_jobs("th1");
    REQUIRE(all.size() == 3);
    CHECK(all[2].confirmation == JobConfirmation::pending);
    CHECK(s->thread_jobs("th2").empty());
    // require_idle: refused while th1 has a RUNNING turn, accepted once it has none.
    CommitBatch idle;
    idle.thread_id = "th1";
    idle.require_idle = true;
    idle.events.push_back(StoredEvent{0, "run_j", to_json_string(events::run_started("th1", "run_j"))});
    try {
      s->commit(idle);
      FAIL("require_idle ignored a running turn");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::conflict);
    }
    TurnRecord t = conformance_turn("t1", "th1", TurnStatus::waiting_approval);
    CommitBatch pause;
    pause.thread_id = "th1";
    pause.turn = t;
    pause.expected_version = 0;
    s->commit(pause);
    s->commit(idle);
    CHECK(idle.events[0].seq == 2);
  }
}

}  // namespace agentrt::testing
