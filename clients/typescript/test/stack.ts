/** The live stack the pytest driver (tests/clients/test_typescript_client.py) started,
 * read from the environment; and a fresh id per use so tests stay independent. */

import { randomUUID } from "node:crypto";

import { MemwellClient } from "@memwell/client";

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this suite through pytest (tests/clients)`);
  return value;
}

export const stack = {
  apiUrl: need("MEMWELL_TEST_API_URL"),
  limitedUrl: need("MEMWELL_TEST_LIMITED_URL"),
  key: need("MEMWELL_TEST_KEY"),
  readKey: need("MEMWELL_TEST_READ_KEY"),
  otherKey: need("MEMWELL_TEST_OTHER_KEY"),
  limitedKey: need("MEMWELL_TEST_LIMITED_KEY"),
  profileUser: need("MEMWELL_TEST_PROFILE_USER"),
  run: need("MEMWELL_TEST_RUN"),
};

export function freshId(label: string): string {
  return `${stack.run}-${label}-${randomUUID().slice(0, 8)}`;
}

export function client(key = stack.key, url = stack.apiUrl): MemwellClient {
  return new MemwellClient({ baseUrl: url, apiKey: key });
}
