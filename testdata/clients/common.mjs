// Shared by the client scripts: the run's settings, the report (one JSON
// line on stdout, which cmd/darkroom/clients_test.go asserts on), and the
// scenarios every SDK-shaped client runs through a small adapter.
import { createHash } from "node:crypto";

export const TASKS_EXT = "io.modelcontextprotocol/tasks";
export const PREVIEW_CAP = 64 * 1024;

// settings is the JSON the Go test passes as the only argument:
// {transport: "http"|"stdio", url, command, args, env, era: "legacy"|"modern",
//  cases: ["basic", "long", "long-raised", "quiet", "tasks"]}.
export function settings() {
  return JSON.parse(process.argv[2] ?? "{}");
}

// Report collects named checks; each is {ok, detail, ...figures}.
export class Report {
  constructor(client) {
    this.out = { client, checks: {} };
  }
  check(name, ok, detail = "", figures = {}) {
    this.out.checks[name] = { ok: !!ok, detail: String(detail).slice(0, 600), ...figures };
    return ok;
  }
  // step runs fn and records a thrown error as a failed check of that name.
  async step(name, fn) {
    try {
      return await fn();
    } catch (e) {
      this.check(name, false, `threw: ${e?.stack ?? e}`);
      return undefined;
    }
  }
  print() {
    process.stdout.write(JSON.stringify(this.out) + "\n");
  }
}

export function sha256(buf) {
  return createHash("sha256").update(buf).digest("hex");
}

// tap wraps a transport so the script sees every message on the wire, in
// both directions, before the SDK does.
export function tap(transport, seen) {
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    seen.push({ dir: "out", msg });
    return send(msg, opts);
  };
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => (handler ? deliver : undefined),
    set: (h) => {
      handler = h;
    },
  });
  const deliver = (msg, extra) => {
    seen.push({ dir: "in", msg });
    return handler?.(msg, extra);
  };
  return transport;
}

// anyTask says whether any response on the wire was a task.
export function anyTask(seen) {
  return seen.some((s) => s.dir === "in" && s.msg?.result?.resultType === "task");
}

// checkOutputs asserts what an assistant needs of a completed result: a
// one-line text first, per output a resource_link then a small image
// preview, bytes by the signed link and by resources/read equal to the
// sha256 in structuredContent.
// opts.link=false skips the signed link (its listener is gone).
export async function checkOutputs(r, prefix, res, readResource, opts = { link: true }) {
  const sc = res?.structuredContent ?? {};
  if (!r.check(`${prefix}completed`, sc.status === "completed" && !res.isError, JSON.stringify(sc).slice(0, 300))) return;
  const content = res.content ?? [];
  const first = content[0];
  r.check(`${prefix}text`, first?.type === "text" && first.text.length > 0 && !first.text.includes("\n"),
    first?.text ?? "no text block", { text: first?.text });
  const outputs = sc.outputs ?? [];
  if (!r.check(`${prefix}outputs`, outputs.length > 0, `${outputs.length} outputs`)) return;
  const o = outputs[0];
  const at = content.findIndex((c) => c.type === "resource_link");
  const link = content[at];
  r.check(`${prefix}resource-link`, link && link.uri.startsWith("darkroom://generations/"), link ? link.uri : "no resource_link");
  const preview = content[at + 1];
  const bytes = preview?.type === "image" ? Buffer.from(preview.data, "base64").length : -1;
  r.check(`${prefix}preview`, at >= 0 && preview?.type === "image" && /^image\/(jpeg|webp)$/.test(preview.mimeType) && bytes > 0 && bytes <= PREVIEW_CAP,
    preview ? `${preview.type} ${preview.mimeType} ${bytes} bytes` : "no block after the resource_link", { previewBytes: bytes });
  if (opts.link) {
    const got = await fetch(o.url);
    const body = Buffer.from(await got.arrayBuffer());
    r.check(`${prefix}link-sha256`, got.status === 200 && sha256(body) === o.sha256, `GET ${got.status}, ${body.length} bytes`, { outputBytes: body.length });
  }
  if (link) {
    await r.step(`${prefix}resources-read`, async () => {
      const rr = await readResource(link.uri);
      const c = rr.contents?.[0];
      const blob = c?.blob ? Buffer.from(c.blob, "base64") : Buffer.alloc(0);
      r.check(`${prefix}resources-read`, sha256(blob) === o.sha256 && c.mimeType === o.mimeType, `${c?.mimeType} ${blob.length} bytes`);
    });
  } else {
    r.check(`${prefix}resources-read`, false, "no resource_link to read");
  }
}

// scenarios runs the cases for an SDK-shaped client. a = {listTools(),
// callTool(name, args, {onprogress}), readResource(uri),
// serverCapabilities(), seen}.
export async function scenarios(r, a, s) {
  const cases = new Set(s.cases ?? ["basic"]);
  if (cases.has("basic")) {
    await r.step("tools", async () => {
      const { tools } = await a.listTools();
      const names = tools.map((t) => t.name);
      r.check("tools", names.includes("generate") && names.includes("wait_generation") && tools.length >= 9, names.join(","));
      // The tool list never changes, so no listChanged is promised; a legacy
      // list carries none of the 2026-only cache fields.
      const caps = a.serverCapabilities();
      r.check("tools-list-changed", caps?.tools && caps.tools.listChanged !== true, JSON.stringify(caps?.tools));
      if (s.era !== "modern") {
        const req = a.seen.find((m) => m.dir === "out" && m.msg.method === "tools/list");
        const res = a.seen.find((m) => m.dir === "in" && req && m.msg.id === req.msg.id && m.msg.result);
        const extra = res ? ["ttlMs", "cacheScope"].filter((k) => k in res.msg.result) : ["no response"];
        r.check("legacy-list-fields", extra.length === 0, extra.join(",") || "none");
      }
    });
    await r.step("generate-wait", async () => {
      const t0 = Date.now();
      const res = await a.callTool("generate", { modelId: "local-sketch", prompt: `a lighthouse, ${r.out.client}`, wait: true, waitSeconds: 30 });
      r.check("generate-wait", res.structuredContent?.status === "completed", JSON.stringify(res.structuredContent).slice(0, 300), { ms: Date.now() - t0 });
      await checkOutputs(r, "", res, a.readResource);
    });
    await r.step("no-task", async () => {
      const res = await a.callTool("generate", { modelId: "local-sketch", prompt: "no task here" });
      r.check("no-task", !anyTask(a.seen) && typeof res.structuredContent?.generationId === "string",
        anyTask(a.seen) ? "a response was a task" : JSON.stringify(res).slice(0, 300));
    });
  }
  if (cases.has("long")) {
    // A video at a slow latency takes about 80 s. Progress does not reset
    // the client's 60 s request timeout here (as @langchain/mcp-adapters
    // calls the SDK), so the server must answer the wait first: timedOut at
    // 55 s, with progress at most 10 s apart; the next wait completes it.
    await r.step("long-wait", async () => {
      const g = await a.callTool("generate", { modelId: "local-motion", prompt: "a long wait", durationSeconds: 2 });
      const id = g.structuredContent.generationId;
      const first = await progressWait(a, id, false);
      const sc = first.res.structuredContent ?? {};
      r.check("long-wait-capped", sc.timedOut === true && sc.status !== "completed" && first.ms >= 54000 && first.ms < 60000 &&
        first.notes.length > 0 && first.gap <= 12500 && first.typed,
        `timedOut=${sc.timedOut} ${sc.status} after ${first.ms} ms, ${first.notes.length} progress notes, largest gap ${first.gap} ms, typed=${first.typed}`,
        { ms: first.ms, progressNotes: first.notes.length, maxGapMs: first.gap });
      // Text for a person: no id, one percentage at most.
      const bad = first.notes.filter((n) => n.message.includes(id) || (n.message.match(/%/g) ?? []).length > 1);
      r.check("progress-text", first.notes.length > 0 && bad.length === 0, (bad[0] ?? first.notes.at(-1))?.message ?? "no notes",
        { text: first.notes.at(-1)?.message });
      let res = first.res;
      let waits = 1;
      for (; waits < 4 && res.structuredContent?.timedOut === true; waits++) res = (await progressWait(a, id, false)).res;
      r.check("long-wait", res.structuredContent?.status === "completed", `${res.structuredContent?.status} after ${waits} waits`, { waits });
      // A video's result: its preview is the first frame.
      await checkOutputs(r, "video-", res, a.readResource, { link: true });
    });
  }
  if (cases.has("long-raised")) {
    // The server's DARKROOM_MAX_WAIT is 120s: one wait outlasts the client's
    // 60 s request timeout, which progress resets (resetTimeoutOnProgress).
    await r.step("raised-wait", async () => {
      const g = await a.callTool("generate", { modelId: "local-motion", prompt: "a raised wait", durationSeconds: 2 });
      const w = await progressWait(a, g.structuredContent.generationId, true);
      r.check("raised-wait", w.res.structuredContent?.status === "completed" && w.ms > 60000 && w.notes.length > 0 && w.gap <= 12500 && w.typed,
        `${w.res.structuredContent?.status} after ${w.ms} ms, ${w.notes.length} progress notes, largest gap ${w.gap} ms, typed=${w.typed}`,
        { ms: w.ms, progressNotes: w.notes.length, maxGapMs: w.gap });
      await checkOutputs(r, "raised-", w.res, a.readResource, { link: true });
    });
  }
  if (cases.has("quiet")) {
    // No progress token: the server must answer before any 60 s client timeout.
    await r.step("quiet-wait", async () => {
      const g = await a.callTool("generate", { modelId: "local-motion", prompt: "a quiet wait", durationSeconds: 2 });
      const id = g.structuredContent.generationId;
      const t0 = Date.now();
      const res = await a.callTool("wait_generation", { generationId: id, timeoutSeconds: 120 });
      const ms = Date.now() - t0;
      const sc = res.structuredContent ?? {};
      r.check("quiet-wait", sc.timedOut === true && sc.status !== "completed" && ms < 60000, `timedOut=${sc.timedOut} status=${sc.status} after ${ms} ms`, { ms });
    });
  }
}

// progressWait is one 120 s wait_generation with a progress token (reset:
// whether progress resets the client's request timeout): the result, how
// long it took, the notes and the largest gap between them (the start and
// the answer included).
async function progressWait(a, id, reset) {
  const notes = [];
  const t0 = Date.now();
  const res = await a.callTool("wait_generation", { generationId: id, timeoutSeconds: 120 }, {
    onprogress: (p) => notes.push({ at: Date.now(), ...p }), reset,
  });
  const ms = Date.now() - t0;
  let gap = 0;
  for (let i = 0, prev = t0; i <= notes.length; i++) {
    const at = i < notes.length ? notes[i].at : t0 + ms;
    gap = Math.max(gap, at - prev);
    prev = at;
  }
  // The server sends one at least every 10 s; callers allow 2.5 s of slack for a loaded machine.
  const typed = notes.every((n) => typeof n.progress === "number" && (n.total === undefined || typeof n.total === "number") && typeof n.message === "string");
  return { res, ms, notes, gap, typed };
}
