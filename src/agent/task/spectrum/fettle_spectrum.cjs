// Fettle's function spectrum for Node: which process (one per test file
// under `node --test`) failed; V8 itself records what each ran
// (NODE_V8_COVERAGE). Changes nothing and prints nothing.
"use strict";
const fs = require("fs");
const path = require("path");
const out = process.env.FETTLE_SPECTRUM_OUT;
// The runner's own process (it starts one per test file) is not a test.
const runner = process.execArgv.includes("--test") && !process.env.NODE_TEST_CONTEXT;
if (out && !runner) {
  process.on("exit", (code) => {
    try {
      const failed = (code || process.exitCode || 0) !== 0;
      fs.writeFileSync(path.join(out, `node-status-${process.pid}.txt`), failed ? "failed" : "passed");
    } catch (_) {}
  });
}
