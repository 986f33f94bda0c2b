// @modelcontextprotocol/ext-tasks on the TypeScript SDK v2: a Tasks client.
// On the 2026-07-28 wire ("tasks"): a generation becomes a task that
// settles, another is cancelled, and subscriptions/listen delivers
// notifications/tasks. On the legacy wire ("legacy-tasks", the extension
// declared at initialize): darkroom answers plainly, never with a task
// the session could not poll.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { anyTask, checkOutputs, Report, settings, sha256, tap, TASKS_EXT } from "./common.mjs";

const s = settings();
const r = new Report("ext-tasks");
const seen = [];
const modern = s.era === "modern";
const transport = tap(
  s.transport === "stdio"
    ? new StdioClientTransport({ command: s.command, args: s.args, env: { ...process.env, ...s.env }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(s.url)),
  seen,
);

// rawDispatch is what ext-tasks needs below the SDK on the 2026 wire (as
// the Inspector builds it): the request goes out on the same transport
// under an id of our own, and its response is taken before the SDK sees it.
const pending = new Map();
let rawSeq = 0;
const deliver = Object.getOwnPropertyDescriptor(transport, "onmessage").get;
Object.defineProperty(transport, "onmessage", {
  configurable: true,
  get() {
    const sdk = deliver();
    return sdk && ((msg, extra) => {
      const p = msg && msg.id !== undefined && pending.get(msg.id);
      if (p && (msg.result !== undefined || msg.error !== undefined)) {
        seen.push({ dir: "in", msg });
        pending.delete(msg.id);
        return p(msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result });
      }
      return sdk(msg, extra);
    });
  },
  set: Object.getOwnPropertyDescriptor(transport, "onmessage").set,
});
const rawDispatch = (request) => new Promise((resolve, reject) => {
  const id = `raw-${++rawSeq}`;
  pending.set(id, resolve);
  transport.send({ jsonrpc: "2.0", id, ...request }).catch((e) => {
    pending.delete(id);
    reject(e);
  });
});

const info = { name: "darkroom-clients-ext-tasks", version: "1" };
// Declared on both wires: at initialize on the legacy one, in every
// request's _meta on the 2026 one (subscriptions/listen needs it too).
const caps = { extensions: { [TASKS_EXT]: {} } };
const client = new Client(info, {
  capabilities: caps,
  versionNegotiation: { mode: modern ? { pin: "2026-07-28" } : "legacy" },
});
let session;
try {
  await client.connect(transport);
  const era = client.getProtocolEra();
  r.check("era", era === s.era, `negotiated ${era}, want ${s.era}`);
  session = createTaskSessionFromClient(client, modern
    ? { endpointId: "darkroom-clients", rawDispatch, v2RequestFraming: { protocolVersion: "2026-07-28", clientInfo: info, clientCapabilities: caps } }
    : { endpointId: "darkroom-clients" });
  if (modern) await tasks();
  else await legacy();
} catch (e) {
  r.check("connect", false, e?.stack ?? e);
} finally {
  r.print();
  await session?.close().catch(() => {});
  await client.close().catch(() => {});
}

async function tasks() {
  const exec = await r.step("tasks-created", () => session.callTool("generate", { modelId: "local-sketch", prompt: "a task, ext-tasks" }));
  if (!r.check("tasks-created", exec?.kind === "task", `execution kind ${exec?.kind}`)) return;
  const id = exec.handle.taskId;
  // Listen for this task's notifications while it runs.
  // toolsListChanged rides along: the acknowledgement names exactly what is
  // honoured (no tool-list notifications where listChanged is not declared).
  // Read from the wire: the SDK's honoredFilter drops extension keys (taskIds).
  const sub = await r.step("tasks-notified", () => client.listen({ taskIds: [id], toolsListChanged: true }));
  const ack = seen.find((m) => m.dir === "in" && m.msg.method === "notifications/subscriptions/acknowledged")?.msg.params.notifications ?? {};
  const listChanged = client.getServerCapabilities()?.tools?.listChanged === true;
  r.check("listen-acknowledged", ack.taskIds?.includes(id) && (ack.toolsListChanged === true) === listChanged,
    `acknowledged ${JSON.stringify(ack)}, tools.listChanged ${listChanged}`);
  const t0 = Date.now();
  const events = [];
  const settled = await r.step("tasks-settled", () => exec.settle({ onEvent: (e) => events.push(e.type === "task" ? e.task.status : e.outcome.status) }));
  r.check("tasks-settled", settled?.outcome.status === "completed", `${settled?.outcome.status} after ${Date.now() - t0} ms; events ${events.join(",")}`, { ms: Date.now() - t0 });
  const res = settled?.outcome.result;
  const o = res?.structuredContent?.outputs?.[0];
  r.check("tasks-result", res?.structuredContent?.status === "completed" && o?.url, JSON.stringify(res?.structuredContent ?? res).slice(0, 300));
  // A task's result is shown as a plain one would be: text, link, preview.
  if (res) await checkOutputs(r, "task-", res, (uri) => client.readResource({ uri }));
  if (o) {
    const got = await fetch(o.url);
    const body = Buffer.from(await got.arrayBuffer());
    r.check("tasks-fresh-links", got.status === 200 && sha256(body) === o.sha256, `GET ${got.status}, ${body.length} bytes`);
  } else {
    r.check("tasks-fresh-links", false, "no output");
  }
  const notes = seen.filter((m) => m.dir === "in" && m.msg.method === "notifications/tasks" && m.msg.params?.taskId === id);
  const statuses = notes.map((m) => m.msg.params.status);
  r.check("tasks-notified", sub && statuses.includes("completed"), `notifications/tasks for the task: ${statuses.join(",") || "none"}`, { notifications: notes.length });
  await sub?.close().catch(() => {});

  // A long video, cancelled while it runs.
  await r.step("tasks-cancelled", async () => {
    const v = await session.callTool("generate", { modelId: "local-motion", prompt: "a task to cancel", durationSeconds: 2 });
    if (!r.check("tasks-cancelled", v.kind === "task", `execution kind ${v.kind}`)) return;
    const t1 = Date.now();
    await v.cancel();
    const out = await v.settle();
    // A running generation is asked to stop; the task ends when the provider
    // confirms, so poll as a client would until it is terminal.
    let view = await session.task(v.handle.taskId).snapshot();
    for (const end = Date.now() + 30000; view.status === "working" && Date.now() < end;) {
      await new Promise((ok) => setTimeout(ok, view.suggestedPollIntervalMs ?? 500));
      view = await session.task(v.handle.taskId).snapshot();
    }
    r.check("tasks-cancelled", out.outcome.status === "cancelled" && view.status === "cancelled", `outcome ${out.outcome.status}, task ${view.status} after ${Date.now() - t1} ms`, { ms: Date.now() - t1 });
  });
}

async function legacy() {
  const exec = await r.step("no-task", () => session.callTool("generate", { modelId: "local-sketch", prompt: "legacy ext-tasks", wait: true, waitSeconds: 30 }));
  if (!exec) return;
  r.check("no-task", exec.kind === "immediate" && !anyTask(seen), `execution kind ${exec.kind}, task on the wire: ${anyTask(seen)}`);
  const settled = await exec.settle();
  const sc = settled.outcome.result?.structuredContent;
  r.check("settled-inline", settled.outcome.status === "completed" && sc?.status === "completed" && typeof sc.generationId === "string", JSON.stringify(sc ?? settled.outcome).slice(0, 300));
}
