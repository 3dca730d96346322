/** The example of docs/integrations/typescript.md (examples/quickstart.ts, which the
 * pytest driver checks is the page's code block), run as a user runs it. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { stack } from "./stack.js";

test("the documented quickstart runs against the live API", async () => {
  const script = fileURLToPath(new URL("../examples/quickstart.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [script], {
    env: { ...process.env, MEMWELL_API_URL: stack.apiUrl, MEMWELL_API_KEY: stack.key },
    timeout: 120_000,
  });
  assert.match(stdout, /^top memory: I am allergic to peanuts\.$/m);
  assert.match(stdout, /^fake reply to: Plan my meals\.$/m);
  assert.match(stdout, /^remembered as turns [0-9a-f-]+, [0-9a-f-]+$/m);
  assert.match(stdout, /^no such memory: not-found$/m);
});
