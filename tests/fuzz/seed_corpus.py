#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/: hand-made inputs, the
recorded OpenAI streams of tests/fixtures/openai-streams, and [schema, instance] pairs from Debian's
json-schema-test-suite (draft 7). Run it again after changing a target's input format; the files are committed
(tests never read outside the repository)."""
import glob
import json
import os
import shutil

here = os.path.dirname(os.path.abspath(__file__))
fx = os.path.join(here, '..', 'fixtures', 'openai-streams')
suite = '/usr/share/json-schema-test-suite/tests/draft7'
out = os.path.join(here, 'corpus')


def put(target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(out, target, name), 'wb') as f:
        f.write(data)


def nested(n):
    return '[' * n + ']' * n


shutil.rmtree(out, ignore_errors=True)

# --- SSE: the recorded streams (chunk files as data: lines) and edge shapes; byte 0 seeds where it is cut.
streams = {}
for p in sorted(glob.glob(fx + '/*.sse')):
    streams[os.path.basename(p)] = open(p, 'rb').read()
for p in sorted(glob.glob(fx + '/*.chunks.txt')):
    lines = [l for l in open(p, 'rb').read().split(b'\n') if l.strip()]
    streams[os.path.basename(p)] = b''.join(b'data: ' + l + b'\n\n' for l in lines) + b'data: [DONE]\n\n'
edge = {
    'crlf': b'data: a\r\ndata: b\r\n\r\nevent: x\r\ndata: c\r\n\r\n',
    'cr-only': b'data: a\rdata: b\r\rid: 7\rretry: 1500\rdata: c\r\r',
    'bom-comment': b'\xef\xbb\xbf: keep-alive\n\ndata:no-space\n\nfield-without-colon\ndata\n\n',
    'unterminated': b'data: {"choices":[]}\n\ndata: [DONE]',
    'error-event': b'event: error\ndata: {"error":{"message":"overloaded","type":"server_error","code":503}}\n\n',
    'retry-id': b'id: 42\nretry: 10\ndata: x\n\nid\ndata: y\n\nretry: nope\ndata: z\n\n',
}
for i, (n, s) in enumerate(sorted(streams.items()) + sorted(edge.items())):
    put('sse_parser', n.replace('.', '-')[:40] + '.bin', bytes([(7 + 13 * i) % 256]) + s)

# --- OpenAI accumulator: byte 0 = 0|2 streamed (2: [DONE] required), 1 = a whole completion body.
for i, (n, s) in enumerate(sorted(streams.items())):
    put('openai_stream', 'stream-' + n.replace('.', '-')[:40] + '.bin', bytes([2 if i % 2 else 0]) + s)
for n in ['error-event', 'unterminated']:
    put('openai_stream', 'stream-' + n + '.bin', b'\x02' + edge[n])
completion = {"id": "c1", "object": "chat.completion", "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi", "tool_calls": [
                  {"id": "call_1", "type": "function",
                   "function": {"name": "book_room", "arguments": "{\"room\":\"A1\"}"}}]},
                  "finish_reason": "tool_calls"}],
              "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
put('openai_stream', 'completion.bin', b'\x01' + json.dumps(completion).encode())
put('openai_stream', 'completion-error.bin',
    b'\x01{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}')
put('openai_stream', 'completion-detail.bin', b'\x01{"detail":[{"loc":["body"],"msg":"field required"}]}')
put('openai_stream', 'stream-deep-chunk.bin', b'\x00data: {"choices":' + nested(80).encode() + b'}\n\n')

# --- Anthropic accumulator: byte 0 bit 0 = a whole Message, bit 1 = message_stop required. The documentation's
# example streams (tests/fixtures/anthropic-streams), a whole Message, and edge shapes.
afx = os.path.join(here, '..', 'fixtures', 'anthropic-streams')
for i, p in enumerate(sorted(glob.glob(afx + '/*.sse'))):
    put('anthropic_stream', 'stream-' + os.path.basename(p).replace('.', '-') + '.bin',
        bytes([2 if i % 2 else 0]) + open(p, 'rb').read())
message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
           "content": [{"type": "thinking", "thinking": "Hmm.", "signature": "c2ln"},
                       {"type": "redacted_thinking", "data": "cmVk"},
                       {"type": "text", "text": "Booking."},
                       {"type": "tool_use", "id": "toolu_1", "name": "book_room", "input": {"room": "A1"}}],
           "stop_reason": "tool_use", "usage": {"input_tokens": 5, "cache_read_input_tokens": 2, "output_tokens": 3}}
put('anthropic_stream', 'message.bin', b'\x01' + json.dumps(message).encode())
put('anthropic_stream', 'message-error.bin',
    b'\x01{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}')
put('anthropic_stream', 'encrypted-value.bin',
    b'\x02' + json.dumps({"provider": "anthropic", "model": "m", "blocks": message["content"][:2]}).encode())
put('anthropic_stream', 'stream-tool-no-input.bin',
    b'\x02event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
    b'{"type":"tool_use","id":"t","name":"n","input":{"a":[1]}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    b'{"type":"input_json_delta","partial_json":"{}"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}')

# --- AG-UI RunAgentInput, resume entries, decisions, messages.
agui = {
    'run-agent-input': {"threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [], "forwardedProps": {},
                        "messages": [{"id": "m0", "role": "assistant", "content": "earlier", "toolCalls": [
                            {"id": "c1", "type": "function", "function": {"name": "book_room", "arguments": "{}"}}]},
                                     {"id": "m1", "role": "tool", "toolCallId": "c1", "content": "ok"},
                                     {"id": "m2", "role": "user", "content": "book a room",
                                      "metadata": {"k": [1, {"v": None}]}}]},
    'parts': {"threadId": "t1", "runId": "r2", "messages": [{"id": "u", "role": "user", "content": [
        {"type": "text", "text": "see"},
        {"type": "image", "source": {"type": "url",
                                     "value": "http://127.0.0.1:8080/api/v1/objects/agentrt/x?expires=1&sig=00"}},
        {"type": "binary", "mimeType": "application/pdf", "data": "JVBERi0=", "filename": "a.pdf"},
        {"type": "document", "source": {"type": "data", "value": "aGk=", "mimeType": "text/plain"},
         "metadata": {"n": 1}}]}]},
    'resume': {"threadId": "t1", "runId": "r3", "messages": [], "resume": [
        {"interruptId": "i1", "status": "resolved",
         "payload": {"approved": True, "editedArgs": {"room": "B2"}, "reason": "ok"}},
        {"interruptId": "i2", "status": "cancelled"},
        {"interruptId": "i3", "status": "resolved", "payload": False}]},
    'decision': {"interruptId": "i1", "action": "approve", "editedArgs": {"room": "A1", "day": "mon"}},
    'decision-approved': {"toolCallId": "c1", "approved": False, "reason": "no"},
    'message-tool': {"id": "m", "role": "tool", "toolCallId": "c", "content": [{"type": "text", "text": "r"}],
                     "error": "e"},
    'message-assistant': {"id": "m", "role": "assistant", "toolCalls": [
        {"id": "c", "type": "function", "function": {"name": "n", "arguments": "{\"a\":1}"}}]},
    'message-unicode': {"id": "m", "role": "user", "content": "h\u00e9\u4e2d\U0001F600 \"q\" \\ \n\t\u0001",
                        "metadata": {"f": 1.5e10, "g": 0.1, "neg": -3, "big": 18446744073709551615, "e": []}},
}
for n, v in agui.items():
    put('agui_input', n + '.json', json.dumps(v, ensure_ascii=False))
put('agui_input', 'deep-metadata.json', '{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user",'
                                        '"content":"x","metadata":{"d":' + nested(70) + '}}]}')
put('agui_input', 'deep-resume.json',
    '[{"interruptId":"i","status":"resolved","payload":{"editedArgs":{"a":' + nested(70) + '}}}]')

# --- JSON texts for the differential parser.
texts = {
    'object': '{"a":[1,-2,3.5,"x\\n\\u00e9",true,false,null],"b":{"c":{}}, "a":"dup"}',
    'numbers': '[0,-0,1e2,1E-2,123456789012345678,1234567890123456789,18446744073709551616,'
               '-9223372036854775808,0.1]',
    'strings': '["\\"\\\\\\/\\b\\f\\n\\r\\t","\\ud83d\\ude00","\u00e9\u4e2d","\\u0000"]',
    'space': ' \n\t\r[ ] ',
    'invalid-trailing': '[1,]',
    'invalid-lead-zero': '[01]',
    'deep-at-4': '[[[[1]]]]',
    'deep-over-4': '[[[[[1]]]]]',
    'deep-300': nested(300),
    'deep-600': nested(600),
    'unterminated': '{"a":"b',
    'message-row': json.dumps({"id": "msg_1", "role": "assistant", "content": "Done", "metadata": {
        "worker_agent_output": {"answer": "Done", "tools": [{"tool_call_id": "c1", "status": "succeeded"}],
                                "usage": []}}}),
}
for n, v in texts.items():
    put('json_parse', n + '.json', v)

# --- JSON Schema: [schema, instance], one valid and one invalid instance of each file's first group.
for f in ['additionalItems', 'additionalProperties', 'allOf', 'anyOf', 'boolean_schema', 'const', 'definitions',
          'enum', 'exclusiveMaximum', 'exclusiveMinimum', 'items', 'maxItems', 'maxLength', 'maxProperties',
          'maximum', 'minItems', 'minLength', 'minProperties', 'minimum', 'multipleOf', 'not', 'oneOf', 'pattern',
          'patternProperties', 'properties', 'ref', 'required', 'type', 'uniqueItems']:
    g = json.load(open(os.path.join(suite, f + '.json')))[0]
    seen = set()
    for t in g['tests']:
        if t['valid'] in seen:
            continue
        seen.add(t['valid'])
        put('json_schema', f'{f}-{"valid" if t["valid"] else "invalid"}.json', json.dumps([g['schema'], t['data']]))
put('json_schema', 'tool-params.json', json.dumps([{"type": "object", "properties": {
    "room": {"type": "string", "minLength": 1, "maxLength": 16, "pattern": "^[A-Z][0-9]+$"},
    "day": {"type": "string", "enum": ["mon", "tue"]}}, "required": ["room", "day"],
                                                    "additionalProperties": False}, {"room": "A1", "day": "mon"}]))
put('json_schema', 'recursive-ref.json', json.dumps([{"type": "array", "items": {"$ref": "#"}}, [[[[]]]]]))

# --- Signed URLs: byte 0 even = verify the text, odd = sign the text as a key, then verify, expire, tamper.
base = 'http://127.0.0.1:8080/api/v1/objects/agentrt/'
put('signed_url', 'verify-wellformed.txt',
    '\x00' + base + 'agent-inputs/u1/t1/uploads/up_1?expires=1700000001000&sig=' + '0' * 64)
put('signed_url', 'verify-encoded.txt', '\x02' + base + 'a%2Fb%20c?expires=99999999999999&sig=' + 'ab' * 32)
put('signed_url', 'verify-other-host.txt', '\x04https://evil.example/api/v1/objects/agentrt/k?expires=1&sig=00')
put('signed_url', 'sign-key.txt', '\x01agent-inputs/u1/t1/uploads/up_abc')
put('signed_url', 'sign-unicode.txt', '\x03d\u00e9j\u00e0/\u4e2d \u6587/k+ey%25.json')
put('signed_url', 'sign-bad-key.txt', '\x05../etc/passwd')

# --- Config decoding.
cfgs = {
    'empty': {},
    'full': {"store": {"type": "sqlite", "path": "x.db", "synchronous": "FULL"},
             "objects": {"type": "fs", "root": "o", "bucket": "b-1", "public_base_url": "http://h:1/o"},
             "model": {"type": "demo"},
             "stages": {"intent": {"call_model": False},
                        "execution": {"system_prompt": "s", "params": {"temperature": 0.2}, "tools": ["a"]}},
             "workers": 3, "max_steps": 5, "approval_timeout_ms": 1000, "context_budget_chars": 5000,
             "flush_interval_ms": 2, "sweep_interval_ms": 100, "instance_lease_ms": 500, "max_input_bytes": 4096,
             "summary_max_chars": 64, "job_timeout_ms": 60000, "max_json_depth": 32, "max_input_parts": 8,
             "max_input_messages": 100},
    'document-layout': {"store": {"layout": "document", "document_max_bytes": 100000, "document_index_path": "d.db"}},
    'openai': {"model": {"type": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m",
                         "api_key_env": "NO_SUCH_KEY"}},
    'objects-null': {"objects": None, "workers": 0},
    'unknown-key': {"colour": "blue"},
}
for n, v in cfgs.items():
    put('config', n + '.json', json.dumps(v))
put('config', 'deep.json', '{"stages":' + nested(80) + '}')

# --- C ABI: byte 0 % 9 picks the entry point (0 start, 1 resume, 2 register, 3 job update, 4 job complete,
# 5 a host tool's result [result_json \n ui_json], 6 a host tool's job start, 7 open, 8 transcribe options).
capi = [
    (0, {"threadId": "fz-in-1", "userId": "u1", "message": {"role": "user", "content": "hello"}}),
    (0, {"threadId": "fz-in-2", "runId": "r1", "userId": "u1",
         "messages": [{"id": "m1", "role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
    (1, [{"interruptId": "x", "action": "approve"}]),
    (1, {"decisions": [{"toolCallId": "call_book_1", "approved": True}], "runId": "run-fz"}),
    (1, {"resume": [{"interruptId": "call_book_1", "status": "cancelled"}]}),
    (2, {"name": "fz_tool", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}},
         "approval": "always", "stages": ["execution"], "idempotent": True, "timeoutMs": 1000}),
    (3, {"status": "running", "progress": 0.5, "message": "m"}),
    (4, {"result": {"url": "x"}, "assets": [{"key": "k"}], "message": "done"}),
    (6, {"status": "queued", "message": "m", "metadata": {"a": 1}, "confirm": False, "timeoutMs": 5000}),
    (7, {"workers": 1, "model": {"type": "demo"}, "demo_tools": True}),
    (8, {"model": "whisper-1", "language": "en", "responseFormat": "text"}),
]
for i, (mode, v) in enumerate(capi):
    put('capi', f'{i:02d}-mode{mode}.json', bytes([mode]) + json.dumps(v).encode())
put('capi', '11-mode5.json', b'\x05{"ok":true,"booking_id":"BK-1"}\n'
                             b'{"type":"booking_card","version":"v1","data":{"room":"A1"},"actions":[{"type":"button"}]}')
put('capi', '12-mode5.json', b'\x05' + nested(100).encode())
put('capi', '13-mode5.json', b'\x05"just text"')
put('capi', '14-mode6.json', b'\x06{"metadata":{"d":' + nested(100).encode() + b'}}')

# --- Packed event rows: byte 0 even = an encoding to decode with the event dictionary, odd = a text to pack.
lz = {
    'overlap': b'\x0c\x35abc\x03\x00\x00',
    'dictionary': b'\x10\x0c\x50\x0d\x00\x00',
    'long-match': b'\xad\x02\x1fx\x01\x00\xff\x1a\x00',
    'literals': b'\x1a\xf0\x0babcdefghijklmnopqrstuvwxyz',
    'bad-distance': b'\x05\x10x\x02\x00\x00',
}
for n, v in lz.items():
    put('lz_dict', 'decode-' + n + '.bin', b'\x00' + v)
rows = [
    '{"type":"STEP_STARTED","stepName":"intent","timestamp":1796522861662}\n'
    '{"type":"STEP_FINISHED","stepName":"intent","timestamp":1796522861662}',
    '{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"Hello there","timestamp":1796522861662}\n'
    '{"type":"TEXT_MESSAGE_END","messageId":"msg_1","timestamp":1796522861662,"metadata":{"agentrt":{"message":{}},'
    '"worker_agent_output":{"answer":"Hello there","run_id":"run_1","tools":[],"turn_id":"turn_1","usage":[]}}}',
    'a' * 1000,
    '',
]
for i, v in enumerate(rows):
    put('lz_dict', f'pack-{i}.bin', b'\x01' + v.encode())

# --- Packed message rows: byte 0 even = a stored body to read, odd = a message's JSON text to pack and read back.
bodies = {
    'user': b'\x02\x03\x01\x02m0\x0bbook a room',
    'call': b'\x02\x02\x02\x02m1\x01\x06call_1\x09book_room\x0d{"room":"A1"}',
    'tool': b'\x02\x04\x45\x02m2\x06booked\x06call_1\x08\x02\x01n\x03\x04\x04list\x07\x03\x04\x05\x06\x01a\x00',
    'double': b'\x02\x03\x41\x01i\x00\x08\x01\x01d\x05\x00\x00\x00\x00\x00\x00\xe0\x3f',
    'deep': b'\x02\x03\x41\x01i\x00\x08\x01\x01a' + b'\x07\x01' * 80 + b'\x07\x00',
    'json-row': b'{"id":"m","role":"user","content":"hi"}',
}
for n, v in bodies.items():
    put('message_body', 'read-' + n + '.bin', b'\x00' + v)
texts = [
    '{"id":"m1","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"n","arguments":"{}"}}]}',
    '{"id":"m2","role":"tool","content":"r","toolCallId":"c","metadata":{"a":[1,-2,0.5,true,null,"s"],"b":{}}}',
    '{"id":"m3","role":"user","content":[{"type":"text","text":"parts"}]}',
    '{"id":"m4","role":"activity"}',
]
for i, v in enumerate(texts):
    put('message_body', f'pack-{i}.bin', b'\x01' + v.encode())
put('message_body', 'read-group.bin', b'\x00\x03\x02' + b'\x06\x02\x03\x01\x01i\x00' + b'\x27' +
    b'{"id":"m","role":"user","content":"hi"}')
