// An approval's card: the tool and its arguments, the deadline counting down, Approve, Reject with a reason, and
// edited arguments checked against the tool's JSON Schema before they are sent.
import React, { useEffect, useState } from "react";

// The time, again every second.
function useNow() {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return now;
}

function Countdown({ expiresAt, now }) {
  const at = Date.parse(expiresAt ?? "");
  if (Number.isNaN(at)) return null;
  const left = Math.max(0, Math.floor((at - now) / 1000));
  if (left === 0) return <span className="expired">expired</span>;
  const h = Math.floor(left / 3600);
  const m = Math.floor((left % 3600) / 60);
  const s = left % 60;
  return <span className="countdown">expires in {h > 0 ? `${h}h ` : ""}{m}m {s}s</span>;
}

// The edited arguments checked against the interrupt's responseSchema.properties.editedArgs (the tool's JSON Schema):
// types, required properties, enums, no unknown properties when the schema says so. The server checks them again.
function checkArgs(schema, value, path = "") {
  if (!schema || typeof schema !== "object") return null;
  const type = Array.isArray(value) ? "array" : value === null ? "null" : typeof value;
  const want = schema.type;
  const fits = (t) =>
    t === type || (t === "integer" && type === "number" && Number.isInteger(value)) || (t === "number" && type === "number");
  if (want && !(Array.isArray(want) ? want.some(fits) : fits(want))) return `${path || "the arguments"}: should be ${want}`;
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value)))
    return `${path || "the value"}: should be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`;
  if (type === "object") {
    for (const r of schema.required ?? []) if (!(r in value)) return `${path}/${r}: is required`;
    const props = schema.properties ?? {};
    for (const [k, v] of Object.entries(value)) {
      if (props[k]) {
        const problem = checkArgs(props[k], v, `${path}/${k}`);
        if (problem) return problem;
      } else if (schema.additionalProperties === false) {
        return `${path}/${k}: is not a known argument`;
      }
    }
  }
  return null;
}

export function ApprovalCard({ interrupt, decided, onDecide, onDismiss }) {
  const [mode, setMode] = useState("choose");
  const meta = interrupt.metadata ?? {};
  const [reason, setReason] = useState("");
  const [edited, setEdited] = useState(JSON.stringify(meta.arguments ?? {}, null, 2));
  const [problem, setProblem] = useState(null);
  const now = useNow();
  const expired = Date.parse(interrupt.expiresAt ?? "") <= now;
  const confirmation = interrupt.reason === "confirmation";
  const resolved = (payload) => ({ interruptId: interrupt.id, status: "resolved", payload });
  return (
    <div className="approval" role="group" aria-label={`Approval for ${meta.toolName ?? "a tool call"}`}>
      <div className="approval-title">
        {interrupt.message ?? `Approve ${meta.toolName}?`} <Countdown expiresAt={interrupt.expiresAt} now={now} />
      </div>
      <pre className="args">{JSON.stringify(meta.arguments ?? {}, null, 2)}</pre>
      {decided ? (
        <div className="muted">{decided}: waiting for the other decisions</div>
      ) : expired ? (
        <button type="button" onClick={onDismiss}>
          Dismiss
        </button>
      ) : mode === "choose" ? (
        <div className="actions">
          <button type="button" onClick={() => onDecide(resolved({ approved: true }), "Approved")}>
            Approve
          </button>
          <button type="button" onClick={() => setMode("reject")}>
            Reject
          </button>
          {!confirmation && (
            <button type="button" onClick={() => setMode("edit")}>
              Edit
            </button>
          )}
        </div>
      ) : mode === "reject" ? (
        <div className="actions">
          <label>
            Reason
            <input value={reason} onChange={(e) => setReason(e.target.value)} />
          </label>
          <button type="button" onClick={() => onDecide(resolved({ approved: false, reason }), "Rejected")}>
            Confirm reject
          </button>
          <button type="button" onClick={() => setMode("choose")}>
            Back
          </button>
        </div>
      ) : (
        <div className="actions">
          <label>
            Arguments
            <textarea rows={6} value={edited} onChange={(e) => setEdited(e.target.value)} />
          </label>
          {problem && (
            <div className="error" role="alert">
              {problem}
            </div>
          )}
          <button
            type="button"
            onClick={() => {
              let value;
              try {
                value = JSON.parse(edited);
              } catch (e) {
                setProblem(`not JSON: ${e.message}`);
                return;
              }
              const schema = interrupt.responseSchema?.properties?.editedArgs ?? { type: "object" };
              const bad = checkArgs(schema, value);
              if (bad) {
                setProblem(bad);
                return;
              }
              onDecide(resolved({ approved: true, editedArgs: value }), "Approved with edits");
            }}
          >
            Approve with edits
          </button>
          <button type="button" onClick={() => setMode("choose")}>
            Back
          </button>
        </div>
      )}
    </div>
  );
}
