// A minimal MCP Apps host for darkroom's browser tests, built on AppBridge
// as real hosts are: it connects to darkroom over Streamable HTTP on the
// 2026-07-28 wire declaring io.modelcontextprotocol/ui, makes the model's
// tool call, reads the tool's linked ui:// resource and renders it in a
// sandboxed iframe (opaque origin) under a strict CSP: hashed scripts only,
// so an inline event handler would not run, and no network at all.
//
// Query: tool, args (JSON), theme (light|dark), refuse=1 (the host refuses
// the view's calls), fixture=1 (the tool result, and the resources it
// names, come from /apphost/fixture.json instead of darkroom: shapes of
// result darkroom's tools cannot make yet; the view itself is darkroom's).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge, PostMessageTransport, getToolUiResourceUri, RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/app-bridge";

const q = new URLSearchParams(location.search);
const host = (window.host = { phase: "loaded", ready: false, error: "", opened: [], sizes: [], viewCalls: [], reads: [], readErrors: [], result: null });
const log = (s) => { document.getElementById("log").textContent += s + "\n"; };

async function sha256(text) {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return btoa(String.fromCharCode(...new Uint8Array(d)));
}

// withCSP puts the policy a strict host would set in front of the view.
async function withCSP(html, csp) {
  const doc = new DOMParser().parseFromString(html, "text/html");
  const hashes = [];
  for (const s of doc.querySelectorAll("script:not([src])")) hashes.push(`'sha256-${await sha256(s.textContent)}'`);
  const extra = (k) => (csp?.[k] || []).join(" ");
  const policy = [
    "default-src 'none'", `script-src ${hashes.join(" ")} ${extra("resourceDomains")}`,
    `style-src 'unsafe-inline' ${extra("resourceDomains")}`, `img-src data: blob: ${extra("resourceDomains")}`,
    `media-src data: blob: ${extra("resourceDomains")}`, `font-src data: ${extra("resourceDomains")}`,
    `connect-src ${extra("connectDomains") || "'none'"}`, "base-uri 'none'", "form-action 'none'",
  ].join("; ");
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy}">`;
  return html.replace(/<head>/i, `<head>${meta}`);
}

async function main() {
  const theme = q.get("theme") || "light";
  document.body.classList.toggle("dark", theme === "dark");
  const client = new Client({ name: "darkroom-apphost", version: "1" }, {
    capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } },
    versionNegotiation: { mode: { pin: "2026-07-28" } },
  });
  host.phase = "connecting"; // each phase is named so a stalled test says where it stalled
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));
  host.phase = "listing tools";
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === q.get("tool"));
  if (!tool) throw new Error(`no tool ${q.get("tool")}`);
  const uri = getToolUiResourceUri(tool);
  if (!uri) throw new Error(`${tool.name} has no ui resource`);
  host.phase = "reading the view";
  const res = await client.readResource({ uri });
  const view = res.contents[0];
  if (view.mimeType !== RESOURCE_MIME_TYPE) throw new Error(`view mimeType ${view.mimeType}`);

  const fixture = q.get("fixture") === "1" ? await (await fetch("/apphost/fixture.json")).json() : null;
  const args = fixture ? fixture.args : JSON.parse(q.get("args") || "{}");
  const result = fixture ? Promise.resolve(fixture.result) : client.callTool({ name: tool.name, arguments: args }); // the model's call

  host.phase = "framing the view";
  const iframe = document.createElement("iframe");
  iframe.sandbox = "allow-scripts";
  iframe.title = "darkroom view";
  document.getElementById("frame").append(iframe);
  const refuse = q.get("refuse") === "1";
  const bridge = new AppBridge(client, { name: "darkroom-apphost", version: "1" },
    { openLinks: {}, serverTools: {}, serverResources: {} },
    { hostContext: { theme, platform: "web", displayMode: "inline", containerDimensions: { maxWidth: 600 } } });
  bridge.onopenlink = async ({ url }) => { host.opened.push(url); return {}; };
  bridge.onsizechange = ({ height }) => { if (height) iframe.style.height = `${Math.ceil(height)}px`; host.sizes.push(height); };
  bridge.oninitialized = async () => {
    host.phase = "awaiting the tool result";
    try {
      await bridge.sendToolInput({ arguments: args });
      host.result = await result;
      await bridge.sendToolResult(host.result);
      host.ready = true;
      host.phase = "result sent";
    } catch (e) { host.error = String(e); log(host.error); }
  };
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  // After connect, which installs AppBridge's own forwarding to the client.
  bridge.oncalltool = async (params, extra) => {
    host.viewCalls.push(params.name);
    if (refuse) throw new Error("the host refused this call");
    return client.callTool(params, extra);
  };
  bridge.onreadresource = async (params, extra) => {
    host.reads.push(params.uri);
    if (refuse) throw new Error("the host refused this read");
    const canned = fixture?.resources?.[params.uri];
    if (canned) return { contents: [{ uri: params.uri, ...canned }] };
    try {
      return await client.readResource(params, extra);
    } catch (e) {
      host.readErrors.push(String(e)); // what the view fell back from
      throw e;
    }
  };
  iframe.srcdoc = await withCSP(view.text, view._meta?.ui?.csp);
}

main().catch((e) => { host.error = String(e?.stack || e); log(host.error); });
