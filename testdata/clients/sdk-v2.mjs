// The TypeScript SDK v2 (@modelcontextprotocol/client): the legacy wire
// (initialize; the Tasks extension declared there, as ext-tasks in legacy
// mode does) or pinned to the 2026-07-28 wire.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { Report, scenarios, settings, tap, TASKS_EXT } from "./common.mjs";

const s = settings();
const r = new Report("sdk-v2");
const seen = [];
const transport = tap(
  s.transport === "stdio"
    ? new StdioClientTransport({ command: s.command, args: s.args, env: { ...process.env, ...s.env }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(s.url)),
  seen,
);
const modern = s.era === "modern";
const client = new Client({ name: "darkroom-clients-sdk-v2", version: "1" }, {
  capabilities: modern ? {} : { extensions: { [TASKS_EXT]: {} } },
  versionNegotiation: { mode: modern ? { pin: "2026-07-28" } : "legacy" },
});
try {
  await client.connect(transport);
  const era = client.getProtocolEra();
  r.check("era", era === s.era, `negotiated ${era}, want ${s.era}`);
  if (!modern) {
    const init = seen.find((m) => m.dir === "out" && m.msg.method === "initialize");
    r.check("declared-tasks", init?.msg.params.capabilities?.extensions?.[TASKS_EXT] !== undefined, JSON.stringify(init?.msg.params.capabilities));
  }
  await scenarios(r, {
    seen,
    listTools: () => client.listTools(),
    // The default 60 s timeout stays; progress resets it only when the case asks (o.reset).
    callTool: (name, args, o = {}) => client.callTool({ name, arguments: args }, o.onprogress ? { onprogress: o.onprogress, resetTimeoutOnProgress: !!o.reset } : {}),
    readResource: (uri) => client.readResource({ uri }),
    serverCapabilities: () => client.getServerCapabilities(),
  }, s);
} catch (e) {
  r.check("connect", false, e?.stack ?? e);
} finally {
  r.print();
  await client.close().catch(() => {});
}
