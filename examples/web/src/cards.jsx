// Tool cards: a UiSchema v1 card ({type, version, data, actions}) rendered by the component registered for its type,
// or as a readable table of its data; the result's summary when the call has no card. Each card carries
// data-ui-type; its actions are buttons that send a message (or call the endpoint an action names).
import React from "react";

function BookingCard({ data }) {
  return (
    <div className="booking">
      <strong>Room {String(data.room ?? "?")}</strong> booked for <strong>{String(data.day ?? "?")}</strong>
      {data.booking_id ? <span className="muted"> · {String(data.booking_id)}</span> : null}
    </div>
  );
}

const registry = { booking_confirmation: BookingCard };

function DataTable({ data }) {
  if (data === null || typeof data !== "object") return <div>{String(data)}</div>;
  return (
    <table className="data">
      <tbody>
        {Object.entries(data).map(([k, v]) => (
          <tr key={k}>
            <th scope="row">{k}</th>
            <td>{typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ToolCard({ ui, summary, onAction }) {
  if (!ui || typeof ui !== "object" || typeof ui.type !== "string") {
    return <div className="card" data-ui-type="summary">{summary}</div>;
  }
  const Component = registry[ui.type] ?? DataTable;
  const actions = Array.isArray(ui.actions) ? ui.actions : [];
  return (
    <div className="card" data-ui-type={ui.type}>
      <div className="card-title">{ui.type.replace(/_/g, " ")}</div>
      <Component data={ui.data ?? {}} />
      {actions.length > 0 && (
        <div className="actions">
          {actions.map((a, i) => (
            <button type="button" key={i} onClick={() => onAction(a)}>
              {String(a.label ?? a.action ?? "Action")}
            </button>
          ))}
        </div>
      )}
    </div>
  );
}
