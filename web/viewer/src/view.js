// darkroom's generation view (MCP Apps). Everything it does goes through
// the host (App → postMessage → host → darkroom, under the caller's own
// authentication); it holds no credential and loads nothing from any
// origin: media arrive as bytes and are shown from data: URLs.
import { App, applyDocumentTheme, applyHostStyleVariables } from "@modelcontextprotocol/ext-apps";

const VIEW_TOOL = "view_generation";
const TERMINAL = new Set(["completed", "failed", "cancelled"]);
// Where a live preview frame may come: at the provider (a synchronous
// call is held while queued).
const PREVIEWING = new Set(["queued", "running"]);

const $ = (id) => document.getElementById(id);
const ui = {
  media: $("media"), inputs: $("inputs"), status: $("status-text"), bar: $("bar"), fill: $("bar-fill"),
  prompt: $("prompt"), facts: $("facts"), error: $("error"), note: $("note"),
  cancel: $("cancel"), download: $("download"),
};

const state = {
  gen: null, // the generation as darkroom's tools return it
  prompt: "", model: "",
  pollMs: 0, timer: 0, // 0: the first poll soon, then the generation's own interval
  shown: [], // per output: key of the media on screen ("preview", "full")
  preview: "", // data: URL of the inline preview (of output 0) from the tool result
  live: null, // the latest live preview frame ({data, mimeType}) while the provider makes it
  links: [], // darkroom:// URIs the result names (resource_link blocks)
  inputsKey: "", // which inputs are on screen
  loading: false, // loadMedia is running
};

// What each input role is called on screen.
const ROLE_LABEL = { image: "Image", mask: "Mask", reference: "Reference", first_frame: "First frame", last_frame: "Last frame" };

const app = new App({ name: "darkroom-viewer", version: "1" }, {}, { autoResize: true });

// --- rendering -----------------------------------------------------------

function show(el, on) { el.hidden = !on; }

// A note is either an outcome (of Cancel, Download) or a refusal by the
// host; a successful refresh clears only the latter.
function setNote(text, kind = "outcome") {
  ui.note.textContent = text || "";
  ui.note.dataset.kind = kind;
  show(ui.note, !!text);
}

function bytesText(n) {
  if (!n) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${Math.round(n / 1024)} KB`;
  return `${(n / (1 << 20)).toFixed(1)} MB`;
}

function typeText(mime) { return (mime || "").split("/")[1]?.toUpperCase() || ""; }

function statusText(g) {
  switch (g.status) {
    case "reserved": return g.uploadRequired ? "Waiting for the input image" : "Waiting for approval";
    case "queued": return g.cancelRequested ? "Queued, cancel requested" : "Queued";
    case "running": return `Generating… ${Math.round((g.progress || 0) * 100)}%` + (g.cancelRequested ? " (cancel requested)" : "");
    case "completed": return g.outputsExpired ? "Completed; the files have been deleted" : "Done";
    case "failed": return "Failed";
    case "cancelled": return "Cancelled; the credits were refunded";
  }
  return g.status || "";
}

function failureText(err) {
  if (!err) return "The generation failed.";
  const msg = (err.message || "").trim();
  if (err.kind === "provider") return `The provider could not make this: ${msg || "no reason given"}.`.replace(/\.\.$/, ".");
  return `darkroom could not finish this generation: ${msg || "internal error"}.`.replace(/\.\.$/, ".");
}

function renderFacts(g) {
  const rows = [];
  if (state.model || g.modelId) rows.push(["Model", state.model || g.modelId]);
  if (g.credits != null) rows.push(["Cost", `${g.credits} credit${g.credits === 1 ? "" : "s"}` + (g.status === "cancelled" ? " (refunded)" : "")]);
  const o = g.outputs?.[0];
  if ((g.outputs?.length || 0) > 1) rows.push(["Outputs", `${g.outputs.length}`]);
  if (o) {
    const dims = o.width && o.height ? `${o.width}×${o.height}` : "";
    rows.push(["Size", [dims, typeText(o.mimeType), bytesText(o.bytes)].filter(Boolean).join(" · ")]);
    if (o.durationSeconds) rows.push(["Duration", `${+o.durationSeconds.toFixed(1)} s`]);
  }
  ui.facts.replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    return [dt, dd];
  }));
  show(ui.facts, rows.length > 0);
}

function render() {
  const g = state.gen;
  document.body.dataset.status = g?.status || "";
  if (!g) return;
  ui.status.textContent = statusText(g);
  show(ui.status.parentElement, g.status !== "completed" || !!g.outputsExpired); // the picture says it
  const live = !TERMINAL.has(g.status);
  show(ui.bar, live);
  ui.fill.style.width = `${Math.round((g.progress || 0) * 100)}%`;
  ui.prompt.textContent = state.prompt;
  show(ui.prompt, !!state.prompt);
  renderFacts(g);
  renderInputs(g);
  if (g.status === "failed") {
    ui.error.textContent = failureText(g.error);
    show(ui.error, true);
  }
  show(ui.cancel, live && !g.cancelRequested);
  // One output: the Download button; several: one in each output's caption.
  show(ui.download, g.status === "completed" && (g.outputs?.length || 0) === 1);
  if (live) showLive();
  else if (isLive(state.shown[0]) && (g.status !== "completed" || g.outputsExpired || !g.outputs?.length)) {
    // Ended without an output to show: the live frame is no result.
    ui.media.replaceChildren();
    show(ui.media, false);
    state.shown = [];
  }
  // Completed: the live frame stays until an output replaces it.
  if (g.status === "completed" && (!state.shown[0] || isLive(state.shown[0])) && state.preview) showMedia(0, state.preview, "image/jpeg", "preview");
}

// A generation's latest live preview frame while its provider makes it (an image block of the
// view tool's or get_generation's result; never an output) is shown in the
// first slot until the output replaces it.
function isLive(key) { return typeof key === "string" && key.startsWith("live:"); }

function showLive() {
  const f = state.live;
  if (!f || !PREVIEWING.has(state.gen?.status)) return;
  showMedia(0, b64ToDataURL(f.data, f.mimeType || "image/jpeg"), f.mimeType || "image/jpeg", `live:${f.data.length}:${f.data.slice(-24)}`);
}

// liveFrame is the image block of a running generation's result (null:
// none).
function liveFrame(result, status) {
  if (!PREVIEWING.has(status)) return null;
  return (result?.content || []).find((c) => c.type === "image" && c.data) || null;
}

// layout makes one figure per output: the picture alone for one, a grid
// of numbered figures, each with its own Download, for several.
function layout(n) {
  if (ui.media.childElementCount === n) return;
  state.shown = [];
  ui.media.classList.toggle("several", n > 1);
  const figs = [];
  for (let i = 0; i < n; i++) {
    const fig = document.createElement("figure");
    fig.dataset.index = String(i);
    const slot = document.createElement("div");
    slot.className = "slot";
    fig.append(slot);
    if (n === 1 && state.inputsKey) {
      // Beside its inputs, the one output says what it is.
      const cap = document.createElement("figcaption");
      cap.textContent = "Result";
      fig.append(cap);
    }
    if (n > 1) {
      const cap = document.createElement("figcaption");
      const label = document.createElement("span");
      label.className = "index";
      label.textContent = `Output ${i + 1} of ${n}`;
      const dl = document.createElement("button");
      Object.assign(dl, { type: "button", className: "download-one", textContent: "Download" });
      dl.setAttribute("aria-label", `Download output ${i + 1} of ${n}`);
      dl.addEventListener("click", () => download(i));
      cap.append(label, dl);
      fig.append(cap);
    }
    figs.push(fig);
  }
  ui.media.replaceChildren(...figs);
}

function altText(n, count) {
  const base = state.prompt || "generated image";
  return count > 1 ? `${base} (output ${n + 1} of ${count})` : base;
}

function showMedia(n, src, mime, key) {
  if (state.shown[n] === key) return;
  const count = Math.max(state.gen?.outputs?.length || 0, 1);
  layout(count);
  const slot = ui.media.children[n]?.querySelector(".slot");
  if (!slot) return;
  const isVideo = mime.startsWith("video/");
  const el = document.createElement(isVideo ? "video" : "img");
  if (isVideo) {
    Object.assign(el, { controls: true, autoplay: true, muted: true, loop: true, playsInline: true });
    el.setAttribute("aria-label", altText(n, count));
  } else el.alt = altText(n, count);
  el.src = src;
  el.dataset.kind = isLive(key) ? "live" : key;
  el.dataset.index = String(n);
  slot.replaceChildren(el);
  show(ui.media, true);
  state.shown[n] = key;
}

// renderInputs shows what an edit (or a video's frames) started from,
// beside the result, each labelled by its role; the bytes come by
// resources/read of the input's darkroom:// URI, so a host that does not
// proxy resources shows the labels only.
function renderInputs(g) {
  const list = Array.isArray(g.inputs) ? g.inputs.filter((i) => i && typeof i.role === "string") : [];
  const key = list.map((i) => `${i.role} ${i.uri || ""}`).join("|");
  if (key === state.inputsKey) return;
  state.inputsKey = key;
  const total = {}, seen = {};
  for (const i of list) total[i.role] = (total[i.role] || 0) + 1;
  const figs = list.map((inp) => {
    seen[inp.role] = (seen[inp.role] || 0) + 1;
    const label = (ROLE_LABEL[inp.role] || inp.role) + (total[inp.role] > 1 ? ` ${seen[inp.role]}` : "");
    const fig = document.createElement("figure");
    fig.dataset.role = inp.role;
    const slot = document.createElement("div");
    slot.className = "slot";
    const cap = document.createElement("figcaption");
    const name = document.createElement("span");
    name.className = "role";
    name.textContent = label;
    cap.append(name);
    if (inp.width && inp.height) {
      const dims = document.createElement("span");
      dims.textContent = `${inp.width}×${inp.height}`;
      cap.append(dims);
    }
    fig.append(slot, cap);
    loadInput(inp, slot, label);
    return fig;
  });
  const heading = document.createElement("h2");
  heading.textContent = "Inputs";
  ui.inputs.replaceChildren(heading, ...figs);
  show(ui.inputs, figs.length > 0);
}

async function loadInput(inp, slot, label) {
  const missing = (text) => {
    const p = document.createElement("div");
    p.className = "missing";
    p.textContent = text;
    slot.replaceChildren(p);
  };
  if (!inp.uri || !app.getHostCapabilities()?.serverResources) { missing("Not shown by this host"); return; }
  missing("Loading…");
  try {
    const r = await app.readServerResource({ uri: inp.uri });
    const c = r.contents?.[0];
    if (!c?.blob) throw new Error("no bytes");
    const img = document.createElement("img");
    img.alt = `${label} (input)`;
    img.dataset.role = inp.role;
    img.src = b64ToDataURL(c.blob, c.mimeType || inp.mimeType || "image/png");
    slot.replaceChildren(img);
  } catch {
    missing("Not available");
  }
}

function b64ToDataURL(b64, mime) { return `data:${mime};base64,${b64}`; }

// --- talking to darkroom through the host --------------------------------

async function call(name, args) {
  const res = await app.callServerTool({ name, arguments: args });
  if (res.isError && !res.structuredContent) {
    const text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join(" ");
    const err = new Error(text || `${name} failed`);
    err.fromDarkroom = true; // darkroom answered; the host did not refuse
    throw err;
  }
  return res;
}

function refused(what, err) {
  setNote(`The host did not let the viewer ${what} (${err?.message || err}). ` +
    (state.gen && !TERMINAL.has(state.gen.status) ? "The status shown may be out of date." : ""), "refused");
}

function adopt(sc) {
  if (!sc || !sc.generationId) return;
  state.gen = sc;
  if (sc.prompt) state.prompt = sc.prompt;
  if (sc.pollIntervalMs > 0) state.pollMs = sc.pollIntervalMs;
  if (TERMINAL.has(sc.status)) clearTimeout(state.timer);
  render();
}

function schedule() {
  clearTimeout(state.timer);
  if (!state.gen || TERMINAL.has(state.gen.status)) return;
  state.timer = setTimeout(poll, Math.max(state.pollMs, 250));
}

async function poll() {
  try {
    const res = await call(VIEW_TOOL, { generationId: state.gen.generationId });
    state.live = liveFrame(res, res.structuredContent?.status) || (PREVIEWING.has(res.structuredContent?.status) ? state.live : null);
    adopt(res.structuredContent);
    if (ui.note.dataset.kind === "refused") setNote("");
  } catch (err) {
    refused("refresh the status", err);
    return; // stop: the host said no
  }
  if (TERMINAL.has(state.gen.status)) loadMedia();
  else schedule();
}

// loadMedia shows every output at full size, one after the other: by
// resources/read of its darkroom:// URI when the result named it, else
// through the view tool. A host refusal stops it (the note says why).
async function loadMedia() {
  const g = state.gen;
  if (g.status !== "completed" || !g.outputs?.length || state.loading) return;
  state.loading = true;
  try {
    layout(g.outputs.length);
    for (let n = 0; n < g.outputs.length; n++) {
      if (state.shown[n] !== "full" && !(await loadOutput(g, n))) break;
    }
  } finally {
    state.loading = false;
  }
}

function ownURI(g, n) { return `darkroom://generations/${g.generationId}/outputs/${n}`; }

async function loadOutput(g, n) {
  const o = g.outputs[n];
  const uri = o.uri || state.links.find((u) => u === ownURI(g, n));
  if (uri && app.getHostCapabilities()?.serverResources) {
    try {
      const r = await app.readServerResource({ uri });
      const c = r.contents?.[0];
      if (c?.blob) { showMedia(n, b64ToDataURL(c.blob, c.mimeType || o.mimeType), c.mimeType || o.mimeType, "full"); return true; }
    } catch { /* fall back to the view tool */ }
  }
  try {
    const res = await call(VIEW_TOOL, { generationId: g.generationId, output: n });
    const blk = (res.content || []).find((c) => c.type === "resource" && c.resource?.blob);
    if (res.isError || !blk) throw new Error((res.content || []).map((c) => c.text || "").join(" ") || "no bytes");
    adopt(res.structuredContent);
    showMedia(n, b64ToDataURL(blk.resource.blob, blk.resource.mimeType || o.mimeType), blk.resource.mimeType || o.mimeType, "full");
    return true;
  } catch (err) {
    refused("fetch the full-size file", err);
    if ((!state.shown[0] || isLive(state.shown[0])) && state.preview) showMedia(0, state.preview, "image/jpeg", "preview");
    return false;
  }
}

// --- host events ---------------------------------------------------------

app.ontoolinput = ({ arguments: args }) => {
  if (typeof args?.prompt === "string") state.prompt = args.prompt;
  if (typeof args?.modelId === "string") state.model = args.modelId;
  render();
};

app.ontoolresult = (result) => {
  const sc = result.structuredContent;
  state.live = liveFrame(result, sc?.status);
  for (const c of result.content || []) {
    if (c.type === "image" && c.data && !state.live && !state.preview) state.preview = b64ToDataURL(c.data, c.mimeType || "image/jpeg");
    if (c.type === "resource_link" && typeof c.uri === "string" && c.uri.startsWith("darkroom://")) state.links.push(c.uri);
  }
  if (!sc?.generationId) {
    const text = (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join(" ");
    ui.status.textContent = result.isError ? "The request was refused" : "Nothing to show";
    ui.error.textContent = text || "darkroom returned no generation.";
    show(ui.error, true);
    return;
  }
  adopt(sc);
  if (TERMINAL.has(sc.status)) {
    loadMedia();
    if (!state.prompt) poll(); // get_generation results carry no prompt
  } else schedule();
};

app.ontoolcancelled = ({ reason }) => {
  ui.status.textContent = `The tool call was cancelled${reason ? ` (${reason})` : ""}.`;
};

function applyContext(ctx) {
  if (!ctx) return;
  if (ctx.theme) applyDocumentTheme(ctx.theme);
  if (ctx.styles?.variables) applyHostStyleVariables(ctx.styles.variables);
}
app.onhostcontextchanged = applyContext;
app.onteardown = async () => { clearTimeout(state.timer); return {}; };

ui.cancel.addEventListener("click", async () => {
  const g = state.gen;
  if (!g) return;
  ui.cancel.disabled = true;
  try {
    const res = await call("cancel_generation", { generationId: g.generationId });
    adopt(res.structuredContent);
    const now = state.gen;
    if (now.status === "cancelled") setNote("Cancelled. The credits were refunded.");
    else if (now.cancelRequested) { setNote("Cancel requested; the provider may still finish first."); schedule(); }
    else setNote(`Too late to cancel: the generation is ${now.status}.`);
    if (now.status === "completed") loadMedia();
  } catch (err) {
    if (err.fromDarkroom) setNote(`Could not cancel: ${err.message}`);
    else refused("cancel", err);
  } finally {
    ui.cancel.disabled = false;
  }
});

// download opens output n's signed link through the host, asking for a
// fresh one first when it is about to expire.
async function download(n) {
  let o = state.gen?.outputs?.[n];
  if (!o) return;
  if (Date.parse(o.expiresAt) - Date.now() < 30_000) {
    try { adopt((await call(VIEW_TOOL, { generationId: state.gen.generationId })).structuredContent); o = state.gen.outputs[n] || o; } catch { /* try the old one */ }
  }
  try {
    const r = await app.openLink({ url: o.url });
    if (r?.isError) setNote("The host would not open the download link.");
  } catch (err) {
    refused("open the download link", err);
  }
}
ui.download.addEventListener("click", () => download(0));

app.connect().then(() => applyContext(app.getHostContext()), (err) => {
  ui.status.textContent = "This viewer needs a host that renders MCP Apps.";
  setNote(String(err?.message || err));
});
