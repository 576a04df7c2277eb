// The server's configuration from VS Code settings: only what the user set
// (defaults stay the server's, so a fettle.toml is not overridden by
// VS Code's copy of every default), nested the way the server reads it
// (`fettle.completion.model` → `{ completion: { model } }`), without the
// keys that are the extension's own.

/** Settings that belong to the extension, not the server. */
export const CLIENT_ONLY = ['server', 'statusBar'];

export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/**
 * `keys` are the contributed setting names under `fettle.` (e.g.
 * `completion.model`); `inspect` gives each one's explicitly set values.
 * The most specific set value wins, as in VS Code.
 */
export function serverSettings(
  keys: readonly string[],
  inspect: (key: string) => Inspected | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const [first] = key.split('.');
    if (CLIENT_ONLY.includes(first)) {
      continue;
    }
    const info = inspect(key);
    const value = info?.workspaceFolderValue ?? info?.workspaceValue ?? info?.globalValue;
    if (value === undefined) {
      continue;
    }
    setPath(out, key.split('.'), value);
  }
  return out;
}

function setPath(target: Record<string, unknown>, parts: string[], value: unknown): void {
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) {
      node[part] = {};
    }
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1]] = value;
}
