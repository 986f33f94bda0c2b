// The TypeScript SDK v1 (@modelcontextprotocol/sdk), what most assistants
// embed today: the legacy stateful wire, a 60 s default request timeout,
// and (like the Inspector) the Tasks extension declared at initialize.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Report, scenarios, settings, tap, TASKS_EXT } from "./common.mjs";

const s = settings();
const r = new Report("sdk-v1");
const seen = [];
const transport = tap(
  s.transport === "stdio"
    ? new StdioClientTransport({ command: s.command, args: s.args, env: { ...process.env, ...s.env }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(s.url)),
  seen,
);
const client = new Client({ name: "darkroom-clients-sdk-v1", version: "1" }, { capabilities: { extensions: { [TASKS_EXT]: {} } } });
try {
  await client.connect(transport);
  const init = seen.find((m) => m.dir === "out" && m.msg.method === "initialize");
  r.check("declared-tasks", init?.msg.params.capabilities?.extensions?.[TASKS_EXT] !== undefined, JSON.stringify(init?.msg.params.capabilities));
  await scenarios(r, {
    seen,
    listTools: () => client.listTools(),
    // The default 60 s timeout stays; progress resets it only when the case
    // asks (o.reset), as some assistants configure and others (e.g.
    // @langchain/mcp-adapters) do not.
    callTool: (name, args, o = {}) => client.callTool({ name, arguments: args }, undefined, o.onprogress ? { onprogress: o.onprogress, resetTimeoutOnProgress: !!o.reset } : {}),
    readResource: (uri) => client.readResource({ uri }),
    serverCapabilities: () => client.getServerCapabilities(),
  }, s);
} catch (e) {
  r.check("connect", false, e?.stack ?? e);
} finally {
  r.print();
  await client.close().catch(() => {});
}
