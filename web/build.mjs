// The page's front-end build: bundles web/src/main.js (the page's code with marked, DOMPurify
// and highlight.js from this folder's lockfile) into one script, src/http/web/assets/app.js,
// which is checked in and embedded in the binary (include_str!). No CDN, no build at run time.
//
//   npm ci --prefix web && node web/build.mjs          rebuild the checked-in bundle
//   node web/build.mjs --check                         exit 1 when the checked-in bundle differs
//   node web/build.mjs --out FILE                      write the bundle elsewhere
//
// The output depends only on the sources and the locked versions (no timestamps, no absolute
// paths), so a rebuild from the lockfile is byte for byte the file in the repository.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const target = join(here, "..", "src", "http", "web", "assets", "app.js");

async function bundle() {
  const result = await esbuild.build({
    entryPoints: [join(here, "src", "main.js")],
    absWorkingDir: here,
    bundle: true,
    format: "iife",
    target: ["chrome110", "firefox115", "safari16"],
    minify: true,
    legalComments: "eof",
    charset: "utf8",
    write: false,
    logLevel: "warning",
  });
  return result.outputFiles[0].contents;
}

const args = process.argv.slice(2);
const built = await bundle();
if (args[0] === "--check") {
  const checkedIn = readFileSync(target);
  if (Buffer.compare(Buffer.from(built), checkedIn) !== 0) {
    console.error(`${target} differs from a rebuild of web/src: run \`npm ci --prefix web && node web/build.mjs\` and commit it`);
    process.exit(1);
  }
  console.log(`bundle ok: ${built.length} bytes, identical to the checked-in ${target}`);
} else {
  const out = args[0] === "--out" ? args[1] : target;
  writeFileSync(out, built);
  console.log(`wrote ${out}: ${built.length} bytes`);
}
