// Builds darkroom's MCP Apps view into one self-contained file,
// ui/viewer.html (scripts and styles inlined), with the esbuild pinned in
// package-lock.json. Run through scripts/viewer.sh build (make generate).
// With a path it writes there instead (make check-generated compares).
// With "host OUT.html" it builds the test host page (testdata/apphost)
// the same way.
import { readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const modules = process.env.NODE_MODULES || path.join(here, "node_modules");
const require = createRequire(path.join(modules, "noop.js"));
const esbuild = require("esbuild");

async function bundle(entry) {
  const out = await esbuild.build({
    entryPoints: [entry], bundle: true, write: false, minify: true, format: "iife",
    target: "es2022", platform: "browser", legalComments: "none", nodePaths: [modules],
    define: { "process.env.NODE_ENV": '"production"' }, logLevel: "warning",
  });
  // A literal </script> would end the inline script early.
  return out.outputFiles[0].text.replaceAll("</script", "<\\/script");
}

async function page(dir, js, css, out) {
  const html = await readFile(path.join(dir, "index.html"), "utf8");
  const style = css ? (await esbuild.transform(await readFile(path.join(dir, css), "utf8"), { loader: "css", minify: true })).code.trim() : "";
  const script = await bundle(path.join(dir, js));
  // Function replacements: the bundle may contain "$&" and the like.
  const built = html.replace("/*STYLE*/", () => style).replace("/*SCRIPT*/", () => script);
  await writeFile(out, built);
  console.error(`built ${path.relative(process.cwd(), out)} (${built.length} bytes)`);
}

if (process.argv[2] === "host") {
  await page(path.join(root, "testdata/apphost"), "host.js", "", process.argv[3]);
} else {
  await page(path.join(here, "src"), "view.js", "style.css", process.argv[2] || path.join(root, "ui/viewer.html"));
}
