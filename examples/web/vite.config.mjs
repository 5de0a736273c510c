import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// Built into dist/ by ./scripts/build; agentrt-server serves it (--web-root examples/web/dist).
export default defineConfig({
  plugins: [react()],
  logLevel: "warn",
  build: { outDir: "dist", emptyOutDir: true },
});
