// The MCP Inspector CLI (@modelcontextprotocol/inspector --cli): one
// process per method, as a person or an agent runs it from a shell, in
// the era --protocol-era names. Over stdio each call starts its own
// `darkroom stdio` on the same data folder, so a later call (resources/read)
// reads what an earlier one made after that server has exited.
import { execFile, spawn } from "node:child_process";
import { checkOutputs, Report, settings, sha256 } from "./common.mjs";

const s = settings();
const r = new Report("inspector");

// cli runs one Inspector CLI call and returns its JSON result (rejecting
// with its error envelope, as err.envelope).
function cli(...args) {
  const target = s.transport === "stdio"
    ? [...Object.entries(s.env ?? {}).flatMap(([k, v]) => ["-e", `${k}=${v}`]), "--", s.command, ...s.args]
    : ["--server-url", s.url]; // an option: --header is variadic and would take a positional URL
  const argv = [s.inspector, "--cli", "--protocol-era", s.era, "--format", "json", "-q", ...args, ...target];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, argv, { maxBuffer: 64 << 20, timeout: 120000 }, (err, stdout, stderr) => {
      let out;
      try {
        out = JSON.parse(stdout || stderr);
      } catch {
        return reject(new Error(`inspector ${args.join(" ")}: ${err ?? ""} stdout=${stdout.slice(0, 300)} stderr=${stderr.slice(0, 600)}`));
      }
      if (out.error || err) {
        const e = new Error(`inspector ${args.join(" ")}: ${JSON.stringify(out.error ?? out).slice(0, 600)}`);
        e.envelope = out.error;
        return reject(e);
      }
      resolve(out.result);
    });
  });
}
const tool = (name, args) => cli("--method", "tools/call", "--tool-name", name, "--tool-args-json", JSON.stringify(args));

if ((s.cases ?? []).includes("auth")) {
  // darkroom with API keys: a call without one must say a bearer key is
  // expected (not send the Inspector into OAuth discovery); with the key
  // it works. --stored-auth-only keeps the Inspector from starting an
  // interactive login, as in any non-interactive run.
  await r.step("auth-missing", async () => {
    try {
      await cli("--method", "tools/list", "--stored-auth-only");
      r.check("auth-missing", false, "tools/list without a key succeeded");
    } catch (e) {
      const msg = e.envelope?.message ?? String(e);
      r.check("auth-missing", e.envelope?.code === "auth_required" && /API key/.test(msg) && /Bearer/.test(msg), msg);
    }
  });
  await r.step("auth-key", async () => {
    const { tools } = await cli("--method", "tools/list", "--header", `Authorization: Bearer ${s.token}`);
    r.check("auth-key", tools.length >= 9, `${tools.length} tools`);
  });
  r.print();
  process.exit(0);
}

await r.step("tools", async () => {
  const { tools } = await cli("--method", "tools/list");
  const names = tools.map((t) => t.name);
  r.check("tools", names.includes("generate") && names.includes("wait_generation") && tools.length >= 9, names.join(","));
});
await r.step("generate-wait", async () => {
  const t0 = Date.now();
  const res = await tool("generate", { modelId: "local-sketch", prompt: `a lighthouse, inspector ${s.era}`, wait: true, waitSeconds: 30 });
  r.check("generate-wait", res.structuredContent?.status === "completed", JSON.stringify(res.structuredContent ?? res).slice(0, 300), { ms: Date.now() - t0 });
  // Over stdio the link's files listener ended with that call's server:
  // the bytes are checked through resources/read (a new server), and the
  // link once a new `darkroom stdio` listens on the same fixed port.
  await checkOutputs(r, "", res, (uri) => cli("--method", "resources/read", "--uri", uri), { link: s.transport !== "stdio" });
  if (s.transport === "stdio") await r.step("link-after-restart", () => linkAfterRestart(res.structuredContent.outputs[0]));
});
if (s.era === "legacy") {
  // The Inspector declares the Tasks extension at initialize: still no task.
  await r.step("no-task", async () => {
    const res = await tool("generate", { modelId: "local-sketch", prompt: "no task here" });
    r.check("no-task", res.resultType !== "task" && typeof res.structuredContent?.generationId === "string", JSON.stringify(res).slice(0, 300));
  });
} else {
  // On the 2026 wire the Inspector is a Tasks client (ext-tasks): a plain
  // generate comes back as a task it polls to the end, so the answer it
  // prints is the completed one (a plain reply would still be queued).
  await r.step("task-settled", async () => {
    const res = await tool("generate", { modelId: "local-sketch", prompt: "a task the Inspector settles" });
    r.check("task-settled", res.structuredContent?.status === "completed", JSON.stringify(res.structuredContent ?? res).slice(0, 300));
  });
}
r.print();

// linkAfterRestart starts `darkroom stdio` again, as an assistant would
// after a restart, and fetches a link the earlier process signed: the
// files listener's fixed port makes it still valid.
async function linkAfterRestart(o) {
  const child = spawn(s.command, s.args, { env: { ...process.env, ...s.env }, stdio: ["pipe", "ignore", "pipe"] });
  try {
    let log = "";
    await new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error(`darkroom stdio did not start: ${log.slice(-600)}`)), 30000);
      child.stderr.on("data", (b) => {
        log += b;
        if (log.includes("darkroom on stdio")) {
          clearTimeout(timer);
          ok();
        }
      });
      child.on("exit", (code) => fail(new Error(`darkroom stdio exited ${code}: ${log.slice(-600)}`)));
    });
    const got = await fetch(o.url);
    const body = Buffer.from(await got.arrayBuffer());
    r.check("link-after-restart", got.status === 200 && sha256(body) === o.sha256, `GET ${got.status}, ${body.length} bytes from a new process`);
  } finally {
    child.stdin.end(); // stdio ends at EOF
    await new Promise((ok) => (child.exitCode !== null ? ok() : child.on("exit", ok)));
  }
}
