import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The page is built once into dist/ and served by serve.mjs (no dev server in the tests).
export default defineConfig({
  plugins: [react()],
  logLevel: "warn",
  build: { outDir: "dist", emptyOutDir: true, chunkSizeWarningLimit: 100000 },
});
