// A CopilotKit page with no adapter code: its React hooks against agentrt-server. `?mode=direct` gives
// CopilotKit an AG-UI HttpAgent pointed at agentrt-server's /agent/runs; `?mode=runtime` points CopilotKit at a
// CopilotRuntime (serve.mjs) whose agent is the same HttpAgent on the server side.
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { HttpAgent } from "@ag-ui/client";
import {
  CopilotChat,
  CopilotKit,
  useAgent,
  useAgentContext,
  useFrontendTool,
  useHumanInTheLoop,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import { z } from "zod";

const params = new URLSearchParams(window.location.search);
const mode = params.get("mode") ?? "direct";
const token = params.get("token") ?? "";

function Features() {
  const [theme, setTheme] = useState("light");
  // A frontend tool: the model calls it, the page runs it and answers.
  useFrontendTool({
    name: "change_theme",
    description: "Change the page's colour theme",
    parameters: z.object({ theme: z.enum(["dark", "light"]) }),
    handler: async ({ theme: next }) => {
      setTheme(next);
      return `theme is ${next}`;
    },
  });
  // Human in the loop: the call waits for the person's click.
  useHumanInTheLoop({
    name: "confirm_plan",
    description: "Ask the person to confirm a plan",
    parameters: z.object({ plan: z.string() }),
    render: ({ args, status, respond }) =>
      respond ? (
        <div data-testid="confirm">
          Go ahead with {args?.plan}?{" "}
          <button type="button" onClick={() => respond("confirmed by the person")}>
            Confirm
          </button>
        </div>
      ) : (
        <div data-testid="confirm-status">{String(status)}</div>
      ),
  });
  // Context for the model, for every run.
  useAgentContext({ description: "The user's timezone", value: "Europe/Paris" });
  // The agent's shared state, both ways.
  const { agent } = useAgent();
  return (
    <div>
      <div id="theme" data-theme={theme}>
        {theme}
      </div>
      <pre id="state">{JSON.stringify(agent?.state ?? null)}</pre>
      <button type="button" id="set-state" onClick={() => agent.setState({ plan: "pro", seats: 3 })}>
        set state
      </button>
    </div>
  );
}

function App() {
  const props =
    mode === "runtime"
      ? { runtimeUrl: "/api/copilotkit" }
      : {
          selfManagedAgents: {
            default: new HttpAgent({ url: "/api/v1/agent/runs", headers: { Authorization: `Bearer ${token}` } }),
          },
        };
  return (
    <CopilotKit {...props} enableInspector={false}>
      <Features />
      <CopilotChat />
    </CopilotKit>
  );
}

createRoot(document.getElementById("root")).render(<App />);
