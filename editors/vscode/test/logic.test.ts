// The extension's logic without VS Code: binary discovery, settings →
// the server's configuration, commands → their arguments, the status bar
// from fettle/stats, and a task's diff read backwards.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';

import { findServer, type Probe } from '../src/binary';
import { forwardLog, parseLogLine } from '../src/log';
import { chatArguments, fixArguments, rewriteArguments, taskArguments, taskMessage } from '../src/commands';
import { parseUnifiedDiff, reverseApply } from '../src/diff';
import { serverSettings, type Inspected } from '../src/settings';
import { statusView } from '../src/status';

function probe(executables: string[], path: string): Probe {
  return { isExecutable: (f) => executables.includes(f), env: { PATH: path }, platform: 'linux', home: '/home/u' };
}

test('the server path setting wins, with ~ expanded', () => {
  const found = findServer('~/bin/fettle', '/ext', probe(['/home/u/bin/fettle', '/usr/bin/fettle'], '/usr/bin'));
  assert.deepEqual(found, { path: '/home/u/bin/fettle', source: 'setting' });
});

test('a configured path that is not executable is an error, not another binary', () => {
  const found = findServer('/nope/fettle', '/ext', probe(['/usr/bin/fettle'], '/usr/bin'));
  assert.ok('error' in found && found.error.includes('fettle.server.path is /nope/fettle'), JSON.stringify(found));
});

test('then PATH, in order, then the bundled binary', () => {
  assert.deepEqual(findServer('', '/ext', probe(['/b/fettle', '/c/fettle'], '/a::/b:/c')), { path: '/b/fettle', source: 'PATH' });
  assert.deepEqual(findServer(undefined, '/ext', probe(['/ext/server/fettle'], '/a')), {
    path: '/ext/server/fettle',
    source: 'bundled',
  });
  const none = findServer(undefined, '/ext', probe([], '/a'));
  assert.ok('error' in none && none.error.includes('Cannot find the fettle server'));
});

test('only settings the user set reach the server, nested, most specific first', () => {
  const set: Record<string, Inspected> = {
    'completion.model': { globalValue: 'fast', workspaceValue: 'slow' },
    'completion.multiline': { globalValue: 'never' },
    'completion.enabled': { workspaceFolderValue: false, globalValue: true },
    'server.path': { globalValue: '/usr/bin/fettle' },
    'models': { globalValue: { fast: { provider: 'ollama', model: 'qwen2.5-coder:1.5b' } } },
  };
  const keys = ['completion.model', 'completion.multiline', 'completion.enabled', 'completion.latency_target_ms', 'server.path', 'statusBar.enabled', 'models'];
  assert.deepEqual(serverSettings(keys, (k) => set[k]), {
    completion: { model: 'slow', multiline: 'never', enabled: false },
    models: { fast: { provider: 'ollama', model: 'qwen2.5-coder:1.5b' } },
  });
  assert.deepEqual(serverSettings(keys, () => undefined), {});
});

test('commands carry the arguments the server documents', () => {
  const range = { start: { line: 1, character: 0 }, end: { line: 3, character: 4 } };
  const empty = { start: { line: 2, character: 1 }, end: { line: 2, character: 1 } };
  assert.deepEqual(rewriteArguments('file:///a.py', range, 7, 'use a dict'), [
    { uri: 'file:///a.py', range, version: 7, instruction: 'use a dict' },
  ]);
  assert.deepEqual(chatArguments('fix it', 'file:///a.py', range), [{ message: 'fix it', uri: 'file:///a.py', range }]);
  assert.deepEqual(chatArguments('fix it', 'file:///a.py', empty), [{ message: 'fix it', uri: 'file:///a.py' }]);
  assert.deepEqual(chatArguments('fix it', undefined, undefined), [{ message: 'fix it' }]);
  assert.deepEqual(fixArguments('file:///a.py'), [{ uri: 'file:///a.py' }]);
  assert.deepEqual(fixArguments(undefined), [{}]);
  assert.deepEqual(taskArguments('t1'), [{ taskId: 't1' }]);
  assert.deepEqual(taskArguments(undefined), [{}]);
  assert.equal(
    taskMessage({ taskId: 't1', status: 'gave_up', summary: 'No tool calls.\nMore.', changedFiles: [] }),
    'Fettle: gave up — No tool calls. (no file changed)',
  );
});

test('the status bar shows the model, work, acceptance and health', () => {
  const stats = { shown: 8, accepted: 2, acceptanceRate: 0.25, models: [{ model: 'local', state: 'ok' }] };
  assert.equal(statusView('local', stats, false, true).text, '$(sparkle) Fettle: local · 25% accepted');
  assert.equal(statusView('local', stats, true, false).text, '$(sync~spin) Fettle: local · ghost text off · 25% accepted');
  const failing = { models: [{ model: 'coder', state: 'paused', reason: 'connection refused' }] };
  const view = statusView('coder', failing, false, true);
  assert.equal(view.text, '$(warning) Fettle: coder');
  assert.match(view.tooltip, /paused: connection refused/);
  assert.match(view.tooltip, /click to turn it off/);
});

test("a task's diff read backwards gives the file before it", () => {
  const before = 'import os\n\ndef total(items):\n    return 0\n-- kept\n\nprint(total([]))\n';
  const after = 'import os\n\ndef total(items):\n    return sum(items)\n\nprint(total([]))\n';
  const diff = [
    'diff --git a/shop.py b/shop.py',
    '--- a/shop.py',
    '+++ b/shop.py',
    '@@ -2,5 +2,4 @@',
    ' ',
    ' def total(items):',
    '-    return 0',
    '--- kept',
    '+    return sum(items)',
    ' ',
    '',
  ].join('\n');
  const files = parseUnifiedDiff(diff);
  assert.deepEqual(files.map((f) => f.path), ['shop.py']);
  assert.equal(reverseApply(after, files[0]), before);
  assert.throws(() => reverseApply(after.replace('sum(items)', 'len(items)'), files[0]), /changed since the task/);
});

test('server log lines keep their level; unknown shapes are errors', async () => {
  assert.deepEqual(parseLogLine('2026-11-26T17:28:35.745180Z  INFO configuration applied'), {
    level: 'info',
    message: 'configuration applied',
  });
  assert.deepEqual(parseLogLine('2026-11-26T17:28:35.745180Z  WARN didChange ignored uri=file:///x'), {
    level: 'warn',
    message: 'didChange ignored uri=file:///x',
  });
  assert.deepEqual(parseLogLine('2026-11-26T17:28:35.745180Z DEBUG checker ran'), { level: 'debug', message: 'checker ran' });
  assert.deepEqual(parseLogLine("thread 'main' panicked at src/x.rs:1:1"), {
    level: 'error',
    message: "thread 'main' panicked at src/x.rs:1:1",
  });
  const input = new PassThrough();
  const seen: string[] = [];
  const sink = Object.fromEntries(
    ['error', 'warn', 'info', 'debug', 'trace'].map((level) => [level, (m: string) => seen.push(`${level}: ${m}`)]),
  ) as never;
  forwardLog(input, sink);
  input.end('2026-11-26T17:28:35.745180Z ERROR model down\n\n2026-11-26T17:28:35.745180Z  INFO ready\n');
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(seen, ['error: model down', 'info: ready']);
});
