/* Golden path B from a pure C99 host: a C tool that needs approval pauses the turn, the host approves, the
 * resumed run executes the tool exactly once. Built with -std=c99 -Wall -Wextra -pedantic -Werror. */
#define _XOPEN_SOURCE 700

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentrt.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define REQUIRE_OK(call)                                                                                  \
  do {                                                                                                    \
    int32_t rc_ = (call);                                                                                 \
    if (rc_ != AGENTRT_OK) {                                                                              \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call, agentrt_status_name(rc_), \
              agentrt_last_error());                                                                      \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

struct tool_state {
  int runs;
  int destroyed;
};

/* Runs on a runtime worker thread; completes the call before returning. */
static void book_room(agentrt_tool_call* call, const char* call_json, void* user_data) {
  struct tool_state* st = (struct tool_state*)user_data;
  st->runs++;
  CHECK(strstr(call_json, "\"toolName\":\"book_room\"") != NULL);
  CHECK(strstr(call_json, "\"room\":\"A1\"") != NULL);
  CHECK(agentrt_tool_call_complete(call, "{\"ok\":true,\"booking_id\":\"BK-C99\",\"room\":\"A1\",\"day\":\"mon\"}",
                                   "{\"type\":\"booking_card\",\"version\":\"v1\",\"data\":{\"room\":\"A1\"}}") ==
        AGENTRT_OK);
  agentrt_tool_call_free(call);
}

static void tool_destroy(void* user_data) { ((struct tool_state*)user_data)->destroyed++; }

/* Copies the string value of the first "key":"..." after `from` into buf (ids and statuses have no escapes). */
static const char* json_string(const char* from, const char* key, char* buf, size_t size) {
  char pattern[64];
  const char *p, *end;
  size_t n;
  snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
  p = strstr(from, pattern);
  if (!p) return NULL;
  p += strlen(pattern);
  end = strchr(p, '"');
  if (!end) return NULL;
  n = (size_t)(end - p);
  if (n >= size) n = size - 1;
  memcpy(buf, p, n);
  buf[n] = '\0';
  return buf;
}

static int remove_entry(const char* path, const struct stat* sb, int flag, struct FTW* ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* The event types of `runs` runs, consecutive streamed deltas collapsed, joined with spaces. */
static void event_shape(agentrt_runtime* rt, const char* thread, int64_t after, int runs, char* out, size_t size,
                        int64_t* last_seq) {
  agentrt_events* stream = NULL;
  char type[64], prev[64] = "";
  int ended = 0;
  out[0] = '\0';
  REQUIRE_OK(agentrt_events_open(&stream, rt, thread, after));
  while (ended < runs) {
    char* event = NULL;
    int64_t seq = 0;
    REQUIRE_OK(agentrt_events_next(&event, &seq, stream, 10000));
    CHECK(seq > after);
    after = seq;
    *last_seq = seq;
    if (json_string(event, "type", type, sizeof type)) {
      int streamed = strcmp(type, "TEXT_MESSAGE_CONTENT") == 0 || strcmp(type, "TOOL_CALL_ARGS") == 0;
      if (!(streamed && strcmp(type, prev) == 0)) {
        if (out[0]) strncat(out, " ", size - strlen(out) - 1);
        strncat(out, type, size - strlen(out) - 1);
      }
      strcpy(prev, type);
      if (strcmp(type, "RUN_FINISHED") == 0 || strcmp(type, "RUN_ERROR") == 0) ended++;
    }
    agentrt_free(event);
  }
  agentrt_events_free(stream);
}

int main(void) {
  char dir[] = "/tmp/agentrt-c99-XXXXXX";
  char config[512], buf[128], turn_id[128], approval_id[128], interrupt_id[128], decisions[512];
  char shape[2048];
  char* out = NULL;
  int64_t last_seq = 0;
  agentrt_runtime* rt = NULL;
  struct tool_state tool = {0, 0};

  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  CHECK(agentrt_abi_version() == AGENTRT_ABI_VERSION);
  snprintf(config, sizeof config,
           "{\"data_dir\":\"%s\",\"model\":{\"type\":\"demo\"},\"workers\":2,\"flush_interval_ms\":5}", dir);
  REQUIRE_OK(agentrt_runtime_open(&rt, config));
  REQUIRE_OK(agentrt_tool_register(rt,
                                   "{\"name\":\"book_room\",\"description\":\"Book a room\",\"approval\":\"always\","
                                   "\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},"
                                   "\"day\":{\"type\":\"string\"}},\"required\":[\"room\",\"day\"]}}",
                                   book_room, &tool, tool_destroy));

  /* Run 1: pauses for approval. */
  REQUIRE_OK(agentrt_turn_start(&out, rt,
                                "{\"threadId\":\"t-c99\",\"userId\":\"u1\","
                                "\"message\":{\"role\":\"user\",\"content\":\"book a room please\"}}"));
  CHECK(json_string(out, "turnId", turn_id, sizeof turn_id) != NULL);
  agentrt_free(out);
  REQUIRE_OK(agentrt_turn_wait(&out, rt, turn_id, 10000));
  CHECK(strstr(out, "\"status\":\"WAITING_APPROVAL\"") != NULL);
  agentrt_free(out);
  CHECK(tool.runs == 0);

  REQUIRE_OK(agentrt_turn_interrupts(&out, rt, turn_id));
  CHECK(json_string(out, "approvalRequestId", approval_id, sizeof approval_id) != NULL);
  CHECK(json_string(strstr(out, "\"interrupts\""), "id", interrupt_id, sizeof interrupt_id) != NULL);
  CHECK(strstr(out, "\"toolCallId\":\"call_book_1\"") != NULL);
  agentrt_free(out);

  event_shape(rt, "t-c99", 0, 1, shape, sizeof shape, &last_seq);
  CHECK(strcmp(shape,
               "RUN_STARTED STEP_STARTED CUSTOM STEP_FINISHED STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS "
               "TOOL_CALL_END STEP_FINISHED RUN_FINISHED") == 0);
  if (failures) fprintf(stderr, "run 1: %s\n", shape);

  /* Approve: the continuation runs the tool once. */
  snprintf(decisions, sizeof decisions, "[{\"interruptId\":\"%s\",\"action\":\"approve\"}]", interrupt_id);
  REQUIRE_OK(agentrt_turn_resume(&out, rt, turn_id, approval_id, decisions));
  CHECK(strstr(out, "\"status\":\"accepted\"") != NULL);
  agentrt_free(out);
  REQUIRE_OK(agentrt_turn_wait(&out, rt, turn_id, 10000));
  CHECK(strstr(out, "\"status\":\"COMPLETED\"") != NULL);
  agentrt_free(out);
  CHECK(tool.runs == 1);

  event_shape(rt, "t-c99", last_seq, 1, shape, sizeof shape, &last_seq);
  CHECK(strcmp(shape,
               "RUN_STARTED STEP_STARTED CUSTOM TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT "
               "TEXT_MESSAGE_END STEP_FINISHED STEP_STARTED STEP_FINISHED RUN_FINISHED") == 0);
  if (failures) fprintf(stderr, "run 2: %s\n", shape);

  /* The same approval again: the first answer, and the tool does not run again. */
  REQUIRE_OK(agentrt_turn_resume(&out, rt, turn_id, approval_id, decisions));
  CHECK(strstr(out, "\"status\":\"accepted\"") != NULL);
  agentrt_free(out);
  CHECK(tool.runs == 1);

  REQUIRE_OK(agentrt_thread_history(&out, rt, "t-c99"));
  CHECK(strstr(out, "Your booking is confirmed: room A1 on Monday.") != NULL);
  CHECK(strstr(out, "\"role\":\"tool\"") != NULL);
  agentrt_free(out);

  /* A bad call reports a code and a message. */
  CHECK(agentrt_turn_get(&out, rt, "turn_unknown") == AGENTRT_E_NOT_FOUND);
  CHECK(out == NULL);
  CHECK(strstr(agentrt_last_error(), "turn_unknown") != NULL);
  (void)json_string(agentrt_last_error(), "x", buf, sizeof buf);

  CHECK(tool.destroyed == 0);
  agentrt_runtime_free(rt);
  CHECK(tool.destroyed == 1);

  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (failures) {
    fprintf(stderr, "golden path B (C99): %d check(s) failed\n", failures);
    return 1;
  }
  printf("golden path B (C99): tool ran once, events and history as expected\n");
  return 0;
}
