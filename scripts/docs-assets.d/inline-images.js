// scripts/docs-assets: the images that swagger-ui-dist's stylesheet holds
// inline as `data:` URLs (its icons), written out as files of their own
// beside it (img-N.svg, .png, .jpg), and the stylesheet pointed to them.
// The docs page's Content-Security-Policy (`default-src 'self'`) refuses
// `data:` images; serving them as files keeps it that strict.
//
//   node inline-images.js DIR    (DIR holds swagger-ui.css; rewritten)
"use strict";
const fs = require("fs");

const dir = process.argv[2];
const extensions = { "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpg" };
const css = fs.readFileSync(`${dir}/swagger-ui.css`, "utf8");
const names = new Map();

function writeOut(mime, params, data) {
  const ext = extensions[mime];
  if (!ext) throw new Error(`an inline image of type ${mime}: not one the server serves`);
  const bytes = params.includes(";base64")
    ? Buffer.from(data, "base64")
    : Buffer.from(decodeURIComponent(data), "utf8");
  const key = `${ext}:${bytes.toString("base64")}`;
  if (!names.has(key)) {
    names.set(key, `img-${names.size + 1}.${ext}`);
    fs.writeFileSync(`${dir}/${names.get(key)}`, bytes);
  }
  return `url(${names.get(key)})`;
}

const out = css
  // Quoted: url("data:TYPE;PARAMS,DATA"), with CSS escapes (\") inside.
  .replace(/url\("data:([a-z+\/]+)((?:;[^,"]*)*),((?:[^"\\]|\\.)*)"\)/g, (_, mime, params, data) =>
    writeOut(mime, params, data.replace(/\\(.)/g, "$1")))
  // Unquoted: url(data:TYPE;base64,DATA).
  .replace(/url\(data:([a-z+\/]+)((?:;[^,)]*)*),([^)]*)\)/g, (_, mime, params, data) =>
    writeOut(mime, params, data));

if (out.includes("data:")) throw new Error("a data: URL is left in swagger-ui.css");
if (names.size === 0) throw new Error("no inline image found in swagger-ui.css: has the package changed?");
fs.writeFileSync(`${dir}/swagger-ui.css`, out);
console.log(names.size);
