// Finding the `fettle` server: the `fettle.server.path` setting, then
// `PATH`, then the binary bundled in the extension (`server/`). Pure
// (the file system and environment are passed in) so that it is tested
// without VS Code.
import * as path from 'path';

export interface Probe {
  /** Whether `file` exists and may be executed. */
  isExecutable(file: string): boolean;
  env: Record<string, string | undefined>;
  platform: string;
  home: string;
}

export type Found =
  | { path: string; source: 'setting' | 'PATH' | 'bundled' }
  | { error: string };

export function findServer(setting: string | undefined, extensionPath: string, probe: Probe): Found {
  const exe = probe.platform === 'win32' ? 'fettle.exe' : 'fettle';
  const configured = (setting ?? '').trim();
  if (configured !== '') {
    // A configured path is used or reported, never silently replaced by
    // another binary: the user chose it.
    const expanded = configured.startsWith('~')
      ? path.join(probe.home, configured.slice(1))
      : configured;
    if (probe.isExecutable(expanded)) {
      return { path: expanded, source: 'setting' };
    }
    return {
      error: `fettle.server.path is ${configured}, which is not an executable file. Fix the setting, or clear it to use fettle from PATH.`,
    };
  }
  const dirs = (probe.env.PATH ?? probe.env.Path ?? '').split(probe.platform === 'win32' ? ';' : ':');
  for (const dir of dirs) {
    if (dir === '') {
      continue;
    }
    const candidate = path.join(dir, exe);
    if (probe.isExecutable(candidate)) {
      return { path: candidate, source: 'PATH' };
    }
  }
  const bundled = path.join(extensionPath, 'server', exe);
  if (probe.isExecutable(bundled)) {
    return { path: bundled, source: 'bundled' };
  }
  return {
    error:
      'Cannot find the fettle server: set fettle.server.path, or put fettle on PATH (cargo install --path . in the Fettle repository).',
  };
}
